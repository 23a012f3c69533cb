import { type ChatRequest, type ChatUsage, type FailureLog, ModelProviderFailure, type ModelToolCall } from '../../platform/ai/models';
import type { Schemas } from '../../platform/api-types';
import type { Database } from '../../platform/db';
import { ApiError, errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import { promptTokenBound, RESERVED_OUTPUT_TOKENS } from '../../platform/usage';
import type { BudgetGate, Hold } from '../billing/service';
import type { ModelService, ResolvedModel } from '../models/service';
import { type AppliedSkill, SKILL_MODEL_PREFIX, type SkillService } from '../skills/service';
import { type DeploymentEmbeddings, OpenAiEmbeddings } from './embeddings';
import type { RemoteImages } from './images';
import { type CompletionRequest, type ModelAsk, modelAsk } from './messages';
import type { ApiModel, CompletionHead, CompletionOutcome } from './presenter';

export type { CompletionOutcome } from './presenter';
export type { DeploymentEmbeddings } from './embeddings';

/** About how many characters a token is, for the usage of a call cut off before its provider reported it (as chat estimates it). */
const CHARS_PER_TOKEN = 4;

export interface OpenAiServiceDeps {
  db: Database;
  models: Pick<ModelService, 'available' | 'lookup' | 'resolve' | 'blockedByPolicy' | 'connectionEmbedder'>;
  /** The skills a caller may chat with, as models named `skill:<skillId>`. */
  skills: Pick<SkillService, 'usable' | 'forChat'>;
  billing: Pick<BudgetGate, 'requireBudget' | 'charge' | 'reserve' | 'release'>;
  embeddings: DeploymentEmbeddings;
  /** Reads the images a request gives by URL. */
  images: Pick<RemoteImages, 'fill'>;
  /** How long a model call may take (chat's `CHAT_TIMEOUT_MS`). */
  timeoutMs: number;
  log?: FailureLog;
  now?: () => Date;
}

/** A chat completion ready to call: its id, the caller, the model resolved as chat resolves it, what it is asked. */
export interface PreparedCompletion {
  head: CompletionHead;
  userId: string;
  model: ResolvedModel;
  ask: ModelAsk;
  /** What the call holds against the caller's quotas until it is charged (null: none applies). */
  hold: Hold | null;
}

/** Where a streamed completion's pieces go as the model writes them (the route writes them as chunks). */
export interface CompletionSink {
  text(text: string): void;
  /** A tool call, whole, the `index`-th of the answer's. */
  toolCall(call: ModelToolCall, index: number): void;
}

/** Why the caller may not call a model: unknown or refused (`404 model_not_found`, as OpenAI), or not of the kind (`400`). */
export function refusal(modelId: string, problem: { reason: string; message: string }, kind: 'chat' | 'embeddings'): ApiError {
  if (problem.reason !== 'kind') return errors.modelNotFound(modelId, problem.message);
  return errors.invalidRequest(`The model "${modelId}" is not ${kind === 'chat' ? 'a chat' : 'an embeddings'} model.`, [
    { path: '/body/model', message: problem.message },
  ]);
}

/**
 * The OpenAI-compatible API: the caller's models, chat completions (whole or streamed) through
 * the same model resolution, policy, budgets and usage ledger as chat, and embeddings. Nothing is
 * stored but the usage: a completion is the request's messages only.
 */
export class OpenAiService {
  private readonly db: Database;
  private readonly models: OpenAiServiceDeps['models'];
  private readonly skills: OpenAiServiceDeps['skills'];
  private readonly billing: OpenAiServiceDeps['billing'];
  private readonly deploymentEmbeddings: DeploymentEmbeddings;
  private readonly images: Pick<RemoteImages, 'fill'>;
  private readonly timeoutMs: number;
  private readonly now: () => Date;
  readonly embeddings: OpenAiEmbeddings;

  constructor({
    db,
    models,
    skills,
    billing,
    embeddings,
    images,
    timeoutMs,
    log = () => undefined,
    now = () => new Date(),
  }: OpenAiServiceDeps) {
    this.db = db;
    this.models = models;
    this.skills = skills;
    this.billing = billing;
    this.deploymentEmbeddings = embeddings;
    this.images = images;
    this.timeoutMs = timeoutMs;
    this.now = now;
    this.embeddings = new OpenAiEmbeddings({ db, models, billing, deployment: embeddings, timeoutMs, log, now });
  }

  /**
   * The chat and embeddings models the caller may call: the deployment's chat models (its default
   * first), its embeddings model, then the caller's own connections' (while `byok` is on), less
   * those the policy blocks; then the skills the caller may chat with, as `skill:<skillId>`.
   */
  async list(userId: string): Promise<ApiModel[]> {
    const { id } = this.deploymentEmbeddings;
    const [available, blocked, skills] = await Promise.all([
      this.models.available(userId),
      this.models.blockedByPolicy(userId, id),
      this.skills.usable(userId),
    ]);
    const callable = available.filter((m) => m.kinds.includes('chat') || m.kinds.includes('embeddings'));
    const own = (m: (typeof callable)[number]) => m.connectionId !== null;
    return [
      ...callable.filter((m) => !own(m)).map((m) => ({ id: m.modelId, ownedBy: m.providerId })),
      ...(blocked ? [] : [{ id, ownedBy: 'embeddings' }]),
      ...callable.filter(own).map((m) => ({ id: m.modelId, ownedBy: m.providerId })),
      ...skills.map((skill) => ({ id: `${SKILL_MODEL_PREFIX}${skill.id}`, ownedBy: 'skill' })),
    ];
  }

  /**
   * Checks a completion request and resolves its model before anything is called: `400` for what
   * the document refuses, `404 model_not_found` for a model the caller may not call, `402
   * budget_exhausted` for a deployment's model with nothing left to spend. Images given by URL
   * are read once the model is known to read images (`400` for one that cannot be read).
   */
  async prepare(userId: string, request: CompletionRequest, client: AbortSignal): Promise<PreparedCompletion> {
    const ask = modelAsk(request);
    // Read at once: the budget applies only to the deployment's models, so it waits for the model.
    const budget = this.billing.requireBudget(userId).then(
      () => null,
      (error: unknown) => error,
    );
    const skill = request.model.startsWith(SKILL_MODEL_PREFIX) ? await this.skillOf(userId, request.model) : null;
    if (skill) {
      // The skill's instructions lead the conversation the client sends (its tools and knowledge are chat's, not /v1's).
      if (skill.instructions.trim() !== '') ask.messages.unshift({ role: 'system', content: skill.instructions });
    }
    const found = skill ? await this.skillModel(userId, skill) : await this.models.lookup(userId, request.model, 'chat');
    if (found.problem) {
      // The deployment's embedder is no model of the catalogue, but a model all the same.
      const embedder = found.problem.reason === 'unknown' && request.model === this.deploymentEmbeddings.id;
      throw refusal(request.model, embedder ? { reason: 'kind', message: 'is not a chat model' } : found.problem, 'chat');
    }
    const { model } = found;
    if (ask.hasImages && !model.kinds.includes('vision')) {
      throw errors.invalidRequest(`The model "${request.model}" does not read images.`, [
        { path: '/body/messages', message: 'must not hold image_url parts for this model' },
      ]);
    }
    if (model.connectionId === null) {
      const refused = await budget;
      if (refused) throw refused;
    }
    await this.images.fill(ask.remoteImages, client);
    const hold = model.connectionId === null ? await this.reserve(userId, model, ask) : null;
    const now = this.now();
    const head = { id: `chatcmpl-${uuidv7(now.getTime())}`, created: Math.floor(now.getTime() / 1000), model: request.model };
    return { head, userId, model, ask, hold };
  }

  /**
   * Holds the call's bound against the caller's quotas (`402 quota_exceeded` without room): the
   * prompt's text and the most it may write, which the call is then limited to.
   */
  private async reserve(userId: string, model: ResolvedModel, ask: ModelAsk): Promise<Hold | null> {
    const outputTokens = ask.settings.maxOutputTokens ?? RESERVED_OUTPUT_TOKENS;
    const hold = await this.billing.reserve(userId, {
      model: model.info,
      usage: { inputTokens: promptTokenBound(ask.messages), outputTokens },
    });
    if (hold) ask.settings.maxOutputTokens = outputTokens;
    return hold;
  }

  /** The whole completion; charged as it was counted. */
  async complete(prepared: PreparedCompletion, client: AbortSignal): Promise<CompletionOutcome> {
    const { request, timeout } = this.request(prepared, client);
    try {
      const result = await prepared.model.caller.generate(request);
      const outcome: CompletionOutcome = {
        text: result.text,
        toolCalls: result.toolCalls,
        finishReason: result.finishReason,
        usage: result.usage,
      };
      await this.charge(prepared, outcome.usage);
      return outcome;
    } catch (error) {
      throw await this.failure(error, prepared, { timeout, client, produced: '' });
    }
  }

  /**
   * The completion as the model writes it, each piece given to `sink`; charged once it ends with
   * what the model counted. A client that goes away stops the call and is charged an estimate of
   * what was produced; a provider's failure or timeout is thrown (`502`, `504`), uncharged as in chat.
   */
  async stream(prepared: PreparedCompletion, client: AbortSignal, sink: CompletionSink): Promise<CompletionOutcome> {
    const { request, timeout } = this.request(prepared, client);
    const outcome: CompletionOutcome = { text: '', toolCalls: [], finishReason: undefined, usage: { inputTokens: 0, outputTokens: 0 } };
    try {
      for await (const part of prepared.model.caller.stream(request)) {
        if (part.type === 'delta') {
          outcome.text += part.text;
          sink.text(part.text);
        } else if (part.type === 'tool-call') {
          outcome.toolCalls.push(part.call);
          sink.toolCall(part.call, outcome.toolCalls.length - 1);
        } else {
          outcome.usage = part.usage;
          outcome.finishReason = part.finishReason;
        }
      }
    } catch (error) {
      const produced = outcome.text + outcome.toolCalls.map((c) => c.argumentsText ?? JSON.stringify(c.arguments)).join('');
      throw await this.failure(error, prepared, { timeout, client, produced });
    }
    await this.charge(prepared, outcome.usage);
    return outcome;
  }

  /** The skill `model` names (`skill:<skillId>`): one the caller may use, else `404 model_not_found` as for a model. */
  private async skillOf(userId: string, model: string): Promise<AppliedSkill> {
    try {
      return await this.skills.forChat(userId, model.slice(SKILL_MODEL_PREFIX.length), 'model');
    } catch (error) {
      if (error instanceof ApiError && (error.status === 404 || error.status === 409))
        throw errors.modelNotFound(model, error.status === 409 ? 'is a disabled skill' : 'is no skill you may use');
      throw error;
    }
  }

  /** A skill's model as `lookup` answers: its own (refused as any model the caller may not call), else the caller's default. */
  private async skillModel(userId: string, skill: AppliedSkill): ReturnType<OpenAiServiceDeps['models']['lookup']> {
    if (skill.model !== null) return this.models.lookup(userId, skill.model, 'chat');
    return { model: await this.models.resolve(userId, null, 'chat', { fallback: true }), problem: null };
  }

  /** OpenAI's `POST /v1/embeddings` (see OpenAiEmbeddings). */
  embed(userId: string, request: Schemas['EmbeddingRequest']): Promise<Schemas['EmbeddingResponse']> {
    return this.embeddings.embed(userId, request);
  }

  /** The model call's request: the client's ask, aborted by the client going away or chat's timeout. */
  private request(prepared: PreparedCompletion, client: AbortSignal): { request: ChatRequest; timeout: AbortSignal } {
    const { model, ask } = prepared;
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const request: ChatRequest = {
      model: model.providerModelId,
      messages: ask.messages,
      signal: AbortSignal.any([client, timeout]),
      settings: ask.settings,
      ...(ask.tools.length > 0 ? { tools: ask.tools, toolChoice: ask.toolChoice } : {}),
    };
    return { request, timeout };
  }

  /**
   * The error a failed call answers: the timeout's `504`, the provider's `502`. A client that went
   * away is charged an estimate of the prompt and of what was `produced` (providers report usage
   * only at the end), as chat charges a stopped reply.
   */
  private async failure(
    error: unknown,
    prepared: PreparedCompletion,
    { timeout, client, produced }: { timeout: AbortSignal; client: AbortSignal; produced: string },
  ): Promise<unknown> {
    if (timeout.aborted) {
      await this.billing.release(prepared.hold);
      return errors.modelProviderTimeout(`The model provider did not answer within ${this.timeoutMs} ms.`);
    }
    if (client.aborted) {
      await this.charge(prepared, estimatedUsage(prepared.ask, produced));
      return errors.modelProviderError('The client closed the connection; the model call was stopped.');
    }
    await this.billing.release(prepared.hold);
    if (error instanceof ModelProviderFailure) return errors.modelProviderError(error.message);
    return error;
  }

  /** Records the call in the usage ledger (kind `openai.chat`, under the completion's id) and charges it as chat's are. */
  private async charge(prepared: PreparedCompletion, usage: ChatUsage): Promise<void> {
    const { head, userId, model } = prepared;
    const at = this.now();
    await this.db.transaction().execute((trx) =>
      this.billing.charge(trx, {
        userId,
        kind: 'openai.chat',
        resourceId: head.id,
        model: model.info,
        connectionId: model.connectionId,
        usage,
        at,
        hold: prepared.hold,
      }),
    );
  }
}

/** The usage of a call cut off before its provider reported it: from the prompt's text (images left out) and what was produced. */
export function estimatedUsage(ask: ModelAsk, produced: string): ChatUsage {
  const prompt = JSON.stringify(ask.messages, (_key, value: unknown) => (value instanceof Uint8Array ? '' : value)).length;
  return { inputTokens: Math.ceil(prompt / CHARS_PER_TOKEN), outputTokens: Math.ceil(produced.length / CHARS_PER_TOKEN) };
}
