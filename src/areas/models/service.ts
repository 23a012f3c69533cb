import {
  baseUrlOf,
  ConnectionChat,
  ConnectionEmbedder,
  type ConnectionKind,
  describeConnectionError,
  hasEmbeddings,
  type ModelKind,
  scrub,
} from '../../platform/ai/connections';
import { type MediaKind, type MediaModels, OpenAIMediaModels } from '../../platform/ai/media';
import { describeProviderError, type FailureLog, type ModelInfo, type ModelProvider } from '../../platform/ai/models';
import { errors } from '../../platform/errors';
import type { Outbound } from '../../platform/net/outbound';
import { type Catalogue, type CatalogueModel, type ModelCatalogue, type ModelProblem, problemIn, usableIn } from './catalogue';
import type { ModelConnectionService } from './connections';
import type * as repo from './repository';

export type { ModelConnectionService } from './connections';

/** The kinds a user may choose a default model for (`embeddings`: one of their connections'). */
export type DefaultKind = 'chat' | 'image' | 'transcription' | 'speech' | 'embeddings';

/** Where the caller's chosen default models come from (their settings). */
export interface DefaultModelsSource {
  defaultModels(userId: string): Promise<Partial<Record<DefaultKind, string>>>;
}

/** A model the caller can use, as `GET /api/v1/models` lists it. */
export interface AvailableModel extends CatalogueModel {
  /** The kinds for which it is the caller's default. */
  defaultFor: DefaultKind[];
}

/** What the media area calls: the model as recorded, its price per unit, and its provider's media models. */
export interface ResolvedMediaModel {
  /** `id` is the modelId (stored with outputs and usage). */
  info: ModelInfo;
  /** What the provider knows the model by (passed to `media`). */
  providerModelId: string;
  /** The user's connection the call goes through (usage is recorded with it, not charged), or null. */
  connectionId: string | null;
  /** Millionths of a cent per unit (0 on a user's own key). */
  microCentsPerUnit: number;
  media: MediaModels;
  /** What a caller is told of a failure (never an address or a key). */
  describe: (error: unknown) => string;
  /** A text for the log without the connection's key. */
  scrub: (text: string) => string;
}

/** What chat and automations call: the model as priced and stored, and how to call it. */
export interface ResolvedModel {
  /** `id` is the modelId (stored with replies and usage); prices are 0 on a user's own key. */
  info: ModelInfo;
  /** Passed as `model` to `caller`. */
  providerModelId: string;
  /** The user's connection the call goes through (usage is recorded with it, not charged), or null. */
  connectionId: string | null;
  /** What it does (`vision`: it reads images). */
  kinds: ModelKind[];
  caller: Pick<ModelProvider, 'generate' | 'stream'>;
}

/**
 * A user's chosen embeddings model (`connectionEmbedder`): ready to call; `fallback` when its
 * connection is gone (the deployment's embedder serves the user again); or a `problem` that keeps
 * it from being called now (the user's search answers lexically and says it).
 */
export type ConnectionEmbeddings =
  | { state: 'ready'; embedder: ConnectionEmbedder; connectionId: string; info: ModelInfo }
  | { state: 'fallback' }
  | { state: 'problem'; message: string };

/** Resolves one of a user's models, as `ModelService.resolve` does, from reads already started (`resolver`). */
export type ModelResolver = (
  modelId: string | null,
  kind: ModelKind,
  options?: { field?: string; fallback?: boolean },
) => Promise<ResolvedModel>;

/** What choosing one of a user's models reads, read at once (`ModelService.choices`). */
interface Choices extends Catalogue {
  chosen: Partial<Record<DefaultKind, string>>;
}

export interface ModelSettings {
  /** How long a call through a connection may take (the chat timeout). */
  callTimeoutMs: number;
  /** How long a media call through a connection may take (MEDIA_TIMEOUT_MS; the chat timeout if unset). */
  mediaTimeoutMs?: number;
}

const MAX_REPLY_BYTES = 32 * 1024 * 1024;
/** Images come back base64-encoded, up to four at once. */
const MAX_MEDIA_REPLY_BYTES = 128 * 1024 * 1024;

/**
 * The models of `choices` the user may call, each with the kinds it is their default for: their
 * chosen model of a kind, else the deployment's default chat model (or first media model of the
 * kind) when they chose none (or one no longer available).
 */
function availableIn(choices: Choices): AvailableModel[] {
  const models = usableIn(choices).map((model) => ({ ...model, defaultFor: [] as DefaultKind[] }));
  for (const kind of ['chat', 'image', 'transcription', 'speech', 'embeddings'] as const) {
    const wanted = choices.chosen[kind];
    const model =
      models.find((m) => m.modelId === wanted && m.kinds.includes(kind)) ??
      (kind !== 'embeddings' ? models.find((m) => m.connectionId === null && m.kinds.includes(kind)) : undefined);
    model?.defaultFor.push(kind);
  }
  return models;
}

/** The available model `modelId` names for `kind` (the default when null); `400` as `resolve` says. */
function pickIn(
  choices: Choices,
  modelId: string | null,
  kind: ModelKind,
  options: { field?: string; fallback?: boolean },
): AvailableModel {
  const problem = modelId === null ? null : problemIn(choices, modelId, kind);
  if (problem && !(options.fallback && problem.gone)) {
    throw errors.invalidRequest(`The model "${modelId}" is not available.`, [
      { path: options.field ?? '/body/model', message: problem.message },
    ]);
  }
  const available = availableIn(choices);
  const model =
    problem || modelId === null
      ? (available.find((m) => (m.defaultFor as string[]).includes(kind)) ?? available.find((m) => m.kinds.includes(kind)))
      : available.find((m) => m.modelId === modelId);
  if (!model) {
    throw errors.invalidRequest(`No ${kind} model is available.`, [
      { path: options.field ?? '/body/model', message: "the deployment's model policy leaves no model to use" },
    ]);
  }
  return model;
}

export interface ModelServiceDeps {
  /** The deployment's provider (configured by the operator), which serves its models. */
  deployment: ModelProvider;
  catalogue: Pick<ModelCatalogue, 'read' | 'refusalOutside'>;
  /** The users' connections, which serve their models. */
  connections: Pick<ModelConnectionService, 'find' | 'target'>;
  /** The callers' chosen defaults (the settings area's). */
  defaults: DefaultModelsSource;
  /** The guard every call through a user's connection goes through. */
  outbound: Outbound;
  settings: ModelSettings;
  /** Where failures of calls are logged (never with the key). */
  log?: FailureLog;
}

/**
 * Which model serves a request: the models a user can call with their defaults, and the model a
 * `model` field names (or the default of its kind), resolved to what calls it — the deployment's
 * provider, or a caller through the user's connection.
 */
export class ModelService {
  /** The vector size each connection embeddings model answered with first, by embedder name. */
  private readonly learnedDimensions = new Map<string, number>();

  private readonly deployment: ModelProvider;
  private readonly catalogue: Pick<ModelCatalogue, 'read' | 'refusalOutside'>;
  private readonly connections: Pick<ModelConnectionService, 'find' | 'target'>;
  private readonly defaults: DefaultModelsSource;
  private readonly outbound: Outbound;
  private readonly settings: ModelSettings;
  private readonly log: FailureLog;

  constructor({ deployment, catalogue, connections, defaults, outbound, settings, log = () => undefined }: ModelServiceDeps) {
    this.deployment = deployment;
    this.catalogue = catalogue;
    this.connections = connections;
    this.defaults = defaults;
    this.outbound = outbound;
    this.settings = settings;
    this.log = log;
  }

  /** The deployment's provider, as `GET /api/v1/model-providers` lists it. */
  get deploymentProvider(): ModelProvider {
    return this.deployment;
  }

  /** The models the user may call, the deployment's first (its default first), each with `defaultFor`. */
  async available(userId: string): Promise<AvailableModel[]> {
    return availableIn(await this.choices(userId, false));
  }

  /** Reads what choosing a model needs, in parallel: the catalogue with the policy, and the user's defaults. */
  private async choices(userId: string, withDisabled: boolean): Promise<Choices> {
    const [catalogue, chosen] = await Promise.all([this.catalogue.read(userId, withDisabled), this.defaults.defaultModels(userId)]);
    return { ...catalogue, chosen };
  }

  /**
   * The model `modelId` names (the caller's default for `kind` when null), ready to call. `400`
   * naming `field` when it is unknown, blocked by the policy, a connection's while `byok` is off,
   * or not a model of `kind`. With `fallback`, a model that is merely gone (a stored choice the
   * deployment or the user removed since) gives way to the default instead.
   */
  async resolve(
    userId: string,
    modelId: string | null,
    kind: ModelKind,
    options: { field?: string; fallback?: boolean } = {},
  ): Promise<ResolvedModel> {
    return this.resolver(userId)(modelId, kind, options);
  }

  /**
   * Starts reading what resolving one of the user's models needs, for a caller that does not know
   * yet which model it wants (a chat turn, before its conversation is read); the resolver answers
   * as `resolve` does. A failed read surfaces when it is called.
   */
  resolver(userId: string): ModelResolver {
    const read = this.choices(userId, true);
    read.catch(() => undefined);
    return async (modelId, kind, options = {}) => {
      const choices = await read;
      return this.callable(pickIn(choices, modelId, kind, options), choices);
    };
  }

  /**
   * The media model `modelId` names (the caller's default for `kind` when null), ready to call
   * through the AI SDK: `400` as `resolve` says, and for a connection whose provider's media APIs
   * are not supported (only OpenAI's format is).
   */
  async resolveMedia(userId: string, modelId: string | null, kind: MediaKind, field = '/body/model'): Promise<ResolvedMediaModel> {
    const choices = await this.choices(userId, true);
    const model = pickIn(choices, modelId, kind, { field });
    const info: ModelInfo = {
      id: model.modelId,
      providerId: model.providerId,
      name: model.name,
      inputCentsPerMillionTokens: 0,
      outputCentsPerMillionTokens: 0,
      default: false,
    };
    if (model.connectionId === null) {
      const media = this.deployment.media;
      if (!media) throw new Error(`the deployment's provider offers no media, yet lists ${model.modelId}`);
      return {
        info,
        providerModelId: model.providerModelId,
        connectionId: null,
        microCentsPerUnit: model.unitPrice?.microCentsPerUnit ?? 0,
        media,
        describe: (error) => describeProviderError(error),
        scrub: (text) => text,
      };
    }
    const row = choices.connections.get(model.connectionId) as repo.ConnectionRow;
    if (row.kind !== 'openai' && row.kind !== 'openai_compatible') {
      throw errors.invalidRequest(`The model "${model.modelId}" cannot be called for ${kind}.`, [
        { path: field, message: `media through ${row.kind} connections is not supported; use an openai or openai_compatible connection` },
      ]);
    }
    const target = this.connections.target(row);
    const fetcher = this.outbound.fetcher({
      timeoutMs: this.settings.mediaTimeoutMs ?? this.settings.callTimeoutMs,
      maxBytes: MAX_MEDIA_REPLY_BYTES,
    });
    const media = new OpenAIMediaModels({ baseUrl: baseUrlOf(target), apiKey: target.apiKey, providerId: row.kind, fetch: fetcher });
    return {
      info,
      providerModelId: model.providerModelId,
      connectionId: row.id,
      microCentsPerUnit: 0,
      media,
      describe: (error) => describeConnectionError(error, target.apiKey),
      scrub: (text) => scrub(text, target.apiKey),
    };
  }

  /**
   * The model `modelId` names, exactly (never a default instead), ready to call; or why the user
   * may not call it for `kind` (the OpenAI-compatible API answers each reason its own way).
   */
  async lookup(
    userId: string,
    modelId: string,
    kind: ModelKind,
  ): Promise<{ model: ResolvedModel; problem: null } | { model: null; problem: ModelProblem }> {
    const choices = await this.choices(userId, true);
    const problem = problemIn(choices, modelId, kind);
    const model = problem ? undefined : availableIn(choices).find((m) => m.modelId === modelId);
    if (!model) return { model: null, problem: problem ?? { message: 'is not available', gone: true, reason: 'unknown' } };
    return { model: this.callable(model, choices), problem: null };
  }

  /**
   * Why the user may not call a model that is not in the catalogue (the deployment's embedder):
   * a policy refuses it, or it is private and not granted to them; null when they may.
   */
  async blockedByPolicy(userId: string, modelId: string): Promise<string | null> {
    return this.catalogue.refusalOutside(userId, modelId);
  }

  /** `400` naming `field` unless `modelId` is a model of `kind` the user may call now. */
  async check(userId: string, modelId: string, kind: ModelKind, field = '/body/model'): Promise<void> {
    const problem = await this.problem(userId, modelId, kind);
    if (problem) throw errors.invalidRequest(`The model "${modelId}" is not available.`, [{ path: field, message: problem.message }]);
  }

  /** Why `modelId` cannot be used for `kind` (`gone`: unknown, rather than refused), or null. */
  async problem(userId: string, modelId: string, kind: ModelKind): Promise<ModelProblem | null> {
    return problemIn(await this.choices(userId, true), modelId, kind);
  }

  /**
   * The embedder of the user's chosen embeddings model `modelId` (`<connectionId>/<model>`, as the
   * settings store it). The connection's existence alone decides `fallback`, as the knowledge
   * indexer's query does; anything else that keeps the model from being called is a `problem`.
   */
  async connectionEmbedder(
    userId: string,
    modelId: string,
    timeouts: { timeoutMs: number; queryTimeoutMs: number },
    /** The vector size to ask for (the OpenAI-compatible API's `dimensions`); the model's own when absent. */
    dimensions?: number,
  ): Promise<ConnectionEmbeddings> {
    const connectionId = modelId.split('/')[0] as string;
    const row = await this.connections.find(userId, connectionId);
    if (!row) return { state: 'fallback' };
    const unavailable = (reason: string) => ({
      state: 'problem' as const,
      message: `The embeddings model "${modelId}" cannot be used: ${reason}.`,
    });
    if (!hasEmbeddings(row.kind as ConnectionKind)) return unavailable("Anthropic's API has no embeddings models");
    const problem = await this.problem(userId, modelId, 'embeddings');
    if (problem) return unavailable(problem.gone ? 'its connection no longer offers it' : problem.message);
    const providerModelId = modelId.slice(connectionId.length + 1);
    const embedder = new ConnectionEmbedder({
      target: this.connections.target(row),
      model: providerModelId,
      modelId,
      guardedFetch: this.outbound.fetcher({ timeoutMs: Math.max(timeouts.timeoutMs, timeouts.queryTimeoutMs), maxBytes: MAX_REPLY_BYTES }),
      timeoutMs: timeouts.timeoutMs,
      queryTimeoutMs: timeouts.queryTimeoutMs,
      learned: this.learnedDimensions,
      dimensions,
    });
    const info: ModelInfo = {
      id: modelId,
      providerId: row.kind,
      name: providerModelId,
      inputCentsPerMillionTokens: 0,
      outputCentsPerMillionTokens: 0,
      default: false,
    };
    return { state: 'ready', embedder, connectionId: row.id, info };
  }

  private callable(model: AvailableModel, choices: Choices): ResolvedModel {
    const info: ModelInfo = {
      id: model.modelId,
      providerId: model.providerId,
      name: model.name,
      inputCentsPerMillionTokens: model.inputCentsPerMillionTokens,
      outputCentsPerMillionTokens: model.outputCentsPerMillionTokens,
      default: model.defaultFor.includes('chat'),
    };
    if (model.connectionId === null)
      return { info, providerModelId: model.providerModelId, connectionId: null, kinds: model.kinds, caller: this.deployment };
    const row = choices.connections.get(model.connectionId) as repo.ConnectionRow;
    const fetcher = this.outbound.fetcher({ timeoutMs: this.settings.callTimeoutMs, maxBytes: MAX_REPLY_BYTES });
    return {
      info,
      providerModelId: model.providerModelId,
      connectionId: row.id,
      kinds: model.kinds,
      caller: new ConnectionChat(this.connections.target(row), fetcher, this.log),
    };
  }
}
