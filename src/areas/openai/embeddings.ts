import { type CountedEmbeddings, type DeploymentEmbedder, EmbeddingsFailure } from '../../platform/ai/embeddings';
import type { FailureLog, ModelInfo } from '../../platform/ai/models';
import type { Schemas } from '../../platform/api-types';
import type { Database } from '../../platform/db';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { BudgetGate } from '../billing/service';
import type { ModelService } from '../models/service';
import { presentEmbeddings } from './presenter';

type EmbeddingRequest = Schemas['EmbeddingRequest'];

/** The deployment's embeddings model: the embedder knowledge search uses, and the id `/v1` names it by. */
export interface DeploymentEmbeddings {
  id: string;
  embedder: DeploymentEmbedder;
}

export interface OpenAiEmbeddingsDeps {
  db: Database;
  models: Pick<ModelService, 'lookup' | 'blockedByPolicy' | 'connectionEmbedder'>;
  billing: Pick<BudgetGate, 'charge' | 'reserve' | 'release'>;
  deployment: DeploymentEmbeddings;
  timeoutMs: number;
  log: FailureLog;
  now: () => Date;
}

/** A model ready to embed: how, what the usage ledger records it as, and through which connection. */
interface Embedding {
  run: () => Promise<CountedEmbeddings>;
  info: ModelInfo;
  connectionId: string | null;
}

/** The texts of `input`; `400` for token arrays, which no embedder here takes. */
function textsOf(input: EmbeddingRequest['input']): string[] {
  if (typeof input === 'string') return [input];
  if (input.every((item): item is string => typeof item === 'string')) return input;
  throw errors.invalidRequest('Token arrays are not supported as input: send the text.', [
    { path: '/body/input', message: 'must be a string or an array of strings' },
  ]);
}

const tooManyDimensions = (modelId: string) =>
  errors.invalidRequest(`The model "${modelId}" cannot change its vector size.`, [
    { path: '/body/dimensions', message: 'is not supported by this model' },
  ]);

/**
 * OpenAI's `POST /v1/embeddings`: the deployment's embedder (the one knowledge search uses) or an
 * embeddings model of the caller's own connection, resolved as chat resolves models (the model
 * policy, the `byok` capability), each call recorded in the usage ledger at cost 0 (embeddings
 * are not priced, as knowledge's are not).
 */
export class OpenAiEmbeddings {
  constructor(private readonly deps: OpenAiEmbeddingsDeps) {}

  async embed(userId: string, request: EmbeddingRequest): Promise<Schemas['EmbeddingResponse']> {
    const texts = textsOf(request.input);
    const embedding = await this.resolve(userId, request.model, texts, request.dimensions);
    // A deployment's model holds its bound (a token per character of input) against the caller's quotas.
    const inputTokens = texts.reduce((n, text) => n + text.length, 0);
    const hold =
      embedding.connectionId === null
        ? await this.deps.billing.reserve(userId, { model: embedding.info, usage: { inputTokens, outputTokens: 0 } })
        : null;
    let result: CountedEmbeddings;
    try {
      result = await embedding.run();
    } catch (error) {
      await this.deps.billing.release(hold);
      if (!(error instanceof EmbeddingsFailure)) throw error;
      this.deps.log('embeddings failed', { model: embedding.info.id, error: error.message, detail: error.detail });
      throw error.timedOut ? errors.modelProviderTimeout(error.message) : errors.modelProviderError(error.message);
    }
    if (result.vectors.length !== texts.length) {
      await this.deps.billing.release(hold);
      throw errors.modelProviderError(`The embeddings model returned ${result.vectors.length} vectors.`);
    }
    const at = this.deps.now();
    await this.deps.db.transaction().execute((trx) =>
      this.deps.billing.charge(trx, {
        userId,
        kind: 'openai.embeddings',
        resourceId: `embd-${uuidv7(at.getTime())}`,
        model: embedding.info,
        connectionId: embedding.connectionId,
        usage: { inputTokens: result.tokens, outputTokens: 0 },
        at,
        hold,
      }),
    );
    return presentEmbeddings(request.model, result.vectors, result.tokens, request.encoding_format ?? 'float');
  }

  /** The embedder `modelId` names for the caller: `404 model_not_found` unless they may call it, `400` for what it cannot do. */
  private async resolve(userId: string, modelId: string, texts: string[], dimensions: number | undefined): Promise<Embedding> {
    const { deployment, models, timeoutMs } = this.deps;
    const free = { inputCentsPerMillionTokens: 0, outputCentsPerMillionTokens: 0, default: false };
    if (modelId === deployment.id) {
      const refused = await models.blockedByPolicy(userId, modelId);
      if (refused) throw errors.modelNotFound(modelId, refused);
      if (dimensions !== undefined && !deployment.embedder.supportsDimensions(dimensions)) throw tooManyDimensions(modelId);
      return {
        run: () => deployment.embedder.embedCounted(texts, dimensions),
        info: { id: modelId, providerId: 'embeddings', name: deployment.embedder.name, ...free },
        connectionId: null,
      };
    }
    const found = await models.lookup(userId, modelId, 'embeddings');
    if (found.problem) {
      if (found.problem.reason !== 'kind') throw errors.modelNotFound(modelId, found.problem.message);
      throw errors.invalidRequest(`The model "${modelId}" is not an embeddings model.`, [
        { path: '/body/model', message: found.problem.message },
      ]);
    }
    const own = await models.connectionEmbedder(userId, modelId, { timeoutMs, queryTimeoutMs: timeoutMs }, dimensions);
    if (own.state === 'fallback') throw errors.modelNotFound(modelId, 'its connection was deleted');
    if (own.state === 'problem') throw errors.invalidRequest(own.message, [{ path: '/body/model', message: 'cannot be called now' }]);
    return { run: () => own.embedder.embedCounted(texts, 'index'), info: own.info, connectionId: own.connectionId };
  }
}
