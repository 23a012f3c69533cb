import type { RequestInput } from '../../platform/api-types';
import {
  baseUrlOf,
  CONNECTION_KINDS,
  ConnectionChat,
  ConnectionEmbedder,
  type ConnectionKind,
  describeConnectionError,
  scrub,
  type ConnectionTarget,
  type DiscoveredModel,
  discoverModels,
  hasEmbeddings,
  type ModelKind,
  modelKinds,
} from '../../platform/ai/connections';
import { type MediaKind, type MediaModels, type MediaUnit, OpenAIMediaModels, UNIT_OF } from '../../platform/ai/media';
import { describeProviderError, type FailureLog, type ModelInfo, type ModelProvider, ModelProviderFailure } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { Outbound } from '../../platform/net/outbound';
import type { PageRequest } from '../../platform/pagination';
import type { SealedColumn, Secrets } from '../../platform/secrets';
import type { Actor, AuditService } from '../audit/service';
import type { CapabilityService } from '../capabilities/service';
import * as repo from './repository';

type CreateInput = RequestInput<'ModelConnectionCreateRequest'>;
type UpdateInput = RequestInput<'ModelConnectionUpdateRequest'>;
type TestInput = RequestInput<'ModelConnectionTestRequest'>;

export type { ConnectionKind, ModelKind };

/** The kinds a user may choose a default model for (`embeddings`: one of their connections'). */
export type DefaultKind = 'chat' | 'image' | 'transcription' | 'speech' | 'embeddings';

/** Where the caller's chosen default models come from (their settings). */
export interface DefaultModelsSource {
  defaultModels(userId: string): Promise<Partial<Record<DefaultKind, string>>>;
}

/** No user has chosen defaults: the deployment's default is everyone's. */
export const NO_DEFAULTS: DefaultModelsSource = { defaultModels: async () => ({}) };

/** A model the caller can use, as `GET /api/v1/models` lists it. */
export interface AvailableModel {
  /** What `model` fields name: the deployment's model id, or `<connectionId>/<provider's model id>`. */
  modelId: string;
  /** The id the provider knows the model by. */
  providerModelId: string;
  providerId: string;
  name: string;
  connectionId: string | null;
  kinds: ModelKind[];
  contextWindow: number | null;
  inputCentsPerMillionTokens: number;
  outputCentsPerMillionTokens: number;
  /** A deployment's media model's price per unit (millionths of a cent). */
  unitPrice?: { unit: MediaUnit; microCentsPerUnit: number };
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
interface Choices {
  /** Every model of the deployment and of the user's connections, before the policy (`catalogue`). */
  catalogue: Array<{ model: AvailableModel; byokEnabled: boolean }>;
  /** The user's connections read for it, by id. */
  connections: Map<string, repo.ConnectionRow>;
  policy: ModelPolicy;
  chosen: Partial<Record<DefaultKind, string>>;
}

export interface ModelPolicy {
  allow: string[] | null;
  block: string[];
  updatedAt: Date | null;
  updatedBy: string | null;
}

export interface ModelSettings {
  /** How long a call through a connection may take (the chat timeout). */
  callTimeoutMs: number;
  /** How long a connection test (reading the model list) may take. */
  testTimeoutMs: number;
  /** Connections per user. */
  connectionsPerUser: number;
  /** How long the policy read from the database is reused (every instance agrees within it). */
  policyCacheMs: number;
  /** How long a media call through a connection may take (MEDIA_TIMEOUT_MS; the chat timeout if unset). */
  mediaTimeoutMs?: number;
}

export const CONNECTION_CREATE_ACTION = 'model_provider.connection.create';
export const CONNECTION_UPDATE_ACTION = 'model_provider.connection.update';
export const CONNECTION_DELETE_ACTION = 'model_provider.connection.delete';
export const POLICY_UPDATE_ACTION = 'administration.model_policy.update';

/** What a connection's API key is sealed for. */
export const apiKeyContext = (connectionId: string) => `model-connection-api-key:${connectionId}`;

/** The column holding sealed API keys, for key rotation. */
export const sealedColumns: SealedColumn[] = [{ table: 'model_connections', idColumn: 'id', column: 'api_key', context: apiKeyContext }];

const NOT_FOUND = 'Model provider connection not found.';
const MAX_LIST_BYTES = 4 * 1024 * 1024;
const MAX_REPLY_BYTES = 32 * 1024 * 1024;
/** Images come back base64-encoded, up to four at once. */
const MAX_MEDIA_REPLY_BYTES = 128 * 1024 * 1024;

const isBlocked = (policy: ModelPolicy, modelId: string, providerModelId: string) =>
  policy.block.includes(modelId) ||
  policy.block.includes(providerModelId) ||
  (policy.allow !== null && !policy.allow.includes(modelId) && !policy.allow.includes(providerModelId));

/**
 * The models of `choices` the user may call, each with the kinds it is their default for: their
 * chosen model of a kind, else the deployment's default chat model (or first media model of the
 * kind) when they chose none (or one no longer available).
 */
function availableIn(choices: Choices): AvailableModel[] {
  const { catalogue, policy, chosen } = choices;
  const models = catalogue
    .filter(({ model, byokEnabled }) => model.connectionId === null || byokEnabled)
    .map(({ model }) => ({ ...model, defaultFor: [] as DefaultKind[] }))
    .filter((m) => !isBlocked(policy, m.modelId, m.providerModelId));
  for (const kind of ['chat', 'image', 'transcription', 'speech', 'embeddings'] as const) {
    const wanted = chosen[kind];
    const model =
      models.find((m) => m.modelId === wanted && m.kinds.includes(kind)) ??
      (kind !== 'embeddings' ? models.find((m) => m.connectionId === null && m.kinds.includes(kind)) : undefined);
    model?.defaultFor.push(kind);
  }
  return models;
}

/** Why `modelId` cannot be used for `kind` (`gone`: unknown, rather than refused), or null. */
function problemIn(choices: Choices, modelId: string, kind: ModelKind): { message: string; gone: boolean } | null {
  const entry = choices.catalogue.find(({ model }) => model.modelId === modelId);
  if (!entry) {
    const names = availableIn(choices)
      .filter((m) => m.kinds.includes(kind))
      .map((m) => m.modelId);
    return { message: `must be one of the available models: ${names.join(', ')}`, gone: true };
  }
  if (entry.model.connectionId !== null && !entry.byokEnabled)
    return { message: 'model provider connections (bring your own key) are disabled for this deployment', gone: false };
  if (isBlocked(choices.policy, entry.model.modelId, entry.model.providerModelId))
    return { message: "the deployment's model policy blocks this model", gone: false };
  if (!entry.model.kinds.includes(kind)) return { message: `is not a ${kind} model`, gone: false };
  return null;
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

/** The discovered models stored with a connection. */
export const discoveredOf = (row: Pick<repo.ConnectionRow, 'models'>): DiscoveredModel[] =>
  (row.models as unknown as DiscoveredModel[] | null) ?? [];
export const enabledOf = (row: Pick<repo.ConnectionRow, 'enabled_models'>): string[] =>
  (row.enabled_models as unknown as string[] | null) ?? [];

export interface ModelServiceDeps {
  db: Database;
  /** The deployment's provider (configured by the operator). */
  deployment: ModelProvider;
  capabilities: Pick<CapabilityService, 'isEnabled'>;
  secrets: Secrets;
  /** The guard every call through a user's connection goes through. */
  outbound: Outbound;
  audit: AuditService;
  settings: ModelSettings;
  /** The callers' chosen defaults (the settings area's); none by default. */
  defaults?: DefaultModelsSource;
  /** Where failures of calls and tests are logged (never with the key). */
  log?: FailureLog;
  now?: () => number;
}

/**
 * The models a user can call: the deployment's and their own connections' (while `byok` is on),
 * less what the deployment's model policy blocks; their defaults; and, for chat and automations,
 * the model a `model` field names, resolved to what calls it.
 */
export class ModelService {
  private cachedPolicy: { policy: ModelPolicy; until: number } | null = null;
  /** The vector size each connection embeddings model answered with first, by embedder name. */
  private readonly learnedDimensions = new Map<string, number>();

  private readonly db: Database;
  private readonly deployment: ModelProvider;
  private readonly capabilities: Pick<CapabilityService, 'isEnabled'>;
  private readonly secrets: Secrets;
  private readonly outbound: Outbound;
  private readonly audit: AuditService;
  private readonly settings: ModelSettings;
  private defaults: DefaultModelsSource;
  private readonly log: FailureLog;
  private readonly now: () => number;

  constructor({
    db,
    deployment,
    capabilities,
    secrets,
    outbound,
    audit,
    settings,
    defaults = NO_DEFAULTS,
    log = () => undefined,
    now = Date.now,
  }: ModelServiceDeps) {
    this.db = db;
    this.deployment = deployment;
    this.capabilities = capabilities;
    this.secrets = secrets;
    this.outbound = outbound;
    this.audit = audit;
    this.settings = settings;
    this.defaults = defaults;
    this.log = log;
    this.now = now;
  }

  /** The deployment's provider, as `GET /api/v1/model-providers` lists it. */
  get deploymentProvider(): ModelProvider {
    return this.deployment;
  }

  /** Replaces where the callers' default models come from (the settings area provides it). */
  useDefaults(source: DefaultModelsSource): void {
    this.defaults = source;
  }

  /** The models the user may call, the deployment's first (its default first), each with `defaultFor`. */
  async available(userId: string): Promise<AvailableModel[]> {
    return availableIn(await this.choices(userId, false));
  }

  /** Reads what choosing a model needs, in parallel: the catalogue (see `catalogue`), the policy and the user's defaults. */
  private async choices(userId: string, withDisabled: boolean): Promise<Choices> {
    const [{ catalogue, connections }, policy, chosen] = await Promise.all([
      this.catalogue(userId, withDisabled),
      this.policy(),
      this.defaults.defaultModels(userId),
    ]);
    return { catalogue, connections, policy, chosen };
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
    const target = this.target(row);
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

  /** `400` naming `field` unless `modelId` is a model of `kind` the user may call now. */
  async check(userId: string, modelId: string, kind: ModelKind, field = '/body/model'): Promise<void> {
    const problem = await this.problem(userId, modelId, kind);
    if (problem) throw errors.invalidRequest(`The model "${modelId}" is not available.`, [{ path: field, message: problem.message }]);
  }

  /** Why `modelId` cannot be used for `kind` (`gone`: unknown, rather than refused), or null. */
  async problem(userId: string, modelId: string, kind: ModelKind): Promise<{ message: string; gone: boolean } | null> {
    return problemIn(await this.choices(userId, true), modelId, kind);
  }

  /**
   * Every model of the deployment and of the user's connections, before the policy. Connection
   * models are left out while `byok` is off, unless `withDisabled` (to say why one is refused).
   */
  private async catalogue(userId: string, withDisabled: boolean): Promise<Pick<Choices, 'catalogue' | 'connections'>> {
    const byokEnabled = await this.capabilities.isEnabled('byok');
    // A deployment model: chat models priced per token, media models per unit.
    const ofDeployment = (m: { id: string; providerId: string; name: string }, kind: ModelKind, price: Partial<AvailableModel>) => ({
      byokEnabled,
      model: {
        modelId: m.id,
        providerModelId: m.id,
        providerId: m.providerId,
        name: m.name,
        connectionId: null,
        kinds: [kind],
        contextWindow: null,
        inputCentsPerMillionTokens: 0,
        outputCentsPerMillionTokens: 0,
        defaultFor: [] as DefaultKind[],
        ...price,
      },
    });
    const deployment = [
      ...this.deployment.models.map((m) =>
        ofDeployment(m, 'chat', {
          inputCentsPerMillionTokens: m.inputCentsPerMillionTokens,
          outputCentsPerMillionTokens: m.outputCentsPerMillionTokens,
        }),
      ),
      ...(this.deployment.media?.models ?? []).map((m) =>
        ofDeployment(m, m.kind, { unitPrice: { unit: UNIT_OF[m.kind], microCentsPerUnit: m.microCentsPerUnit } }),
      ),
    ];
    if (!byokEnabled && !withDisabled) return { catalogue: deployment, connections: new Map() };
    const connections = await repo.allConnections(this.db, userId);
    const own = connections.flatMap((row) => {
      const discovered = discoveredOf(row);
      const enabled = enabledOf(row);
      const ids = enabled.length > 0 ? enabled : discovered.map((m) => m.id);
      return ids.map((id) => ({
        byokEnabled,
        model: {
          modelId: `${row.id}/${id}`,
          providerModelId: id,
          providerId: row.kind,
          name: id,
          connectionId: row.id,
          kinds: modelKinds(row.kind as ConnectionKind, id),
          contextWindow: discovered.find((m) => m.id === id)?.contextWindow ?? null,
          inputCentsPerMillionTokens: 0,
          outputCentsPerMillionTokens: 0,
          defaultFor: [] as DefaultKind[],
        },
      }));
    });
    return { catalogue: [...deployment, ...own], connections: new Map(connections.map((row) => [row.id, row])) };
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
  ): Promise<ConnectionEmbeddings> {
    const connectionId = modelId.split('/')[0] as string;
    const row = await repo.findConnection(this.db, userId, connectionId);
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
      target: this.target(row),
      model: providerModelId,
      modelId,
      guardedFetch: this.outbound.fetcher({ timeoutMs: Math.max(timeouts.timeoutMs, timeouts.queryTimeoutMs), maxBytes: MAX_REPLY_BYTES }),
      timeoutMs: timeouts.timeoutMs,
      queryTimeoutMs: timeouts.queryTimeoutMs,
      learned: this.learnedDimensions,
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

  /**
   * Records what a call through a connection found, for its owner to see (`status`, `lastError`):
   * a failure marks it `error`; a success clears an earlier error. Writes only on a change.
   */
  async reportConnectionOutcome(userId: string, connectionId: string, error: string | null): Promise<void> {
    await repo.markConnection(this.db, userId, connectionId, error);
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
    if (model.connectionId === null) return { info, providerModelId: model.providerModelId, connectionId: null, caller: this.deployment };
    const row = choices.connections.get(model.connectionId) as repo.ConnectionRow;
    const fetcher = this.outbound.fetcher({ timeoutMs: this.settings.callTimeoutMs, maxBytes: MAX_REPLY_BYTES });
    return {
      info,
      providerModelId: model.providerModelId,
      connectionId: row.id,
      caller: new ConnectionChat(this.target(row), fetcher, this.log),
    };
  }

  private target(row: repo.ConnectionRow): ConnectionTarget {
    return {
      kind: row.kind as ConnectionKind,
      baseUrl: row.base_url,
      apiKey: row.api_key === null ? null : this.secrets.open(row.api_key, apiKeyContext(row.id)),
    };
  }

  // ---- the model policy ----

  async policy(): Promise<ModelPolicy> {
    if (this.cachedPolicy && this.cachedPolicy.until > this.now()) return this.cachedPolicy.policy;
    const row = await repo.findPolicy(this.db);
    const policy: ModelPolicy = row
      ? {
          allow: (row.allow as unknown as string[] | null) ?? null,
          block: (row.block as unknown as string[] | null) ?? [],
          updatedAt: row.updated_at,
          updatedBy: row.updated_by,
        }
      : { allow: null, block: [], updatedAt: null, updatedBy: null };
    this.cachedPolicy = { policy, until: this.now() + this.settings.policyCacheMs };
    return policy;
  }

  /** Replaces the lists given, audited in the same transaction; this instance sees it at once. */
  async updatePolicy(actor: Actor, changes: { allow?: string[] | null; block?: string[] }): Promise<ModelPolicy> {
    await this.db.transaction().execute(async (trx) => {
      const row = await repo.upsertPolicy(trx, { ...changes, updatedBy: actor.userId, at: new Date(this.now()) });
      await this.audit.record(
        actor,
        {
          action: POLICY_UPDATE_ACTION,
          resourceType: 'model_policy',
          resourceId: row.id,
          outcome: 'success',
          metadata: { allow: row.allow, block: row.block },
        },
        trx,
      );
    });
    this.cachedPolicy = null;
    return this.policy();
  }

  // ---- the caller's connections ----

  async connection(userId: string, connectionId: string): Promise<repo.ConnectionRow> {
    const row = await repo.findConnection(this.db, userId, connectionId);
    if (!row) throw errors.notFound(NOT_FOUND);
    return row;
  }

  connections(userId: string, page: PageRequest) {
    return repo.connectionList.page(this.db, { ownerUserId: userId }, page);
  }

  async createConnection(actor: Actor, input: CreateInput): Promise<repo.ConnectionRow> {
    if (input.kind === 'openai_compatible' && input.baseUrl === undefined) {
      throw errors.invalidRequest('An openai_compatible connection needs a base URL.', [
        { path: '/body/baseUrl', message: 'is required for kind openai_compatible' },
      ]);
    }
    if (input.baseUrl !== undefined) await this.checkBaseUrl(input.baseUrl);
    const now = new Date(this.now());
    const id = uuidv7(now.getTime());
    return this.db.transaction().execute(async (trx) => {
      // Serialized per user, so that concurrent creates cannot pass the limit together.
      await lockForTransaction(trx, `model-connections:${actor.userId}`);
      const limit = this.settings.connectionsPerUser;
      if ((await repo.countConnections(trx, actor.userId)) >= limit) {
        throw errors.conflict(`You already have ${limit} model provider connections, the most a user may have.`);
      }
      const row = await repo.insertConnection(trx, {
        id,
        owner_user_id: actor.userId,
        kind: input.kind,
        name: input.name,
        base_url: input.baseUrl ?? null,
        api_key: input.apiKey === undefined ? null : this.secrets.seal(input.apiKey, apiKeyContext(id)),
        enabled_models: JSON.stringify(input.enabledModels ?? []),
        created_at: now,
        updated_at: now,
      });
      await this.audit.record(
        actor,
        {
          action: CONNECTION_CREATE_ACTION,
          resourceType: 'model_connection',
          resourceId: id,
          outcome: 'success',
          metadata: auditMetadata(row),
        },
        trx,
      );
      return row;
    });
  }

  async updateConnection(actor: Actor, input: UpdateInput): Promise<repo.ConnectionRow> {
    const current = await this.connection(actor.userId, input.connectionId);
    if (input.baseUrl === null && current.kind === 'openai_compatible') {
      throw errors.invalidRequest('An openai_compatible connection needs a base URL.', [
        { path: '/body/baseUrl', message: 'cannot be null for kind openai_compatible' },
      ]);
    }
    if (typeof input.baseUrl === 'string') await this.checkBaseUrl(input.baseUrl);
    const reachChanged = (input.baseUrl !== undefined && input.baseUrl !== current.base_url) || input.apiKey !== undefined;
    return this.db.transaction().execute(async (trx) => {
      const row = await repo.updateConnection(trx, actor.userId, input.connectionId, {
        name: input.name,
        base_url: input.baseUrl,
        api_key:
          input.apiKey === undefined
            ? undefined
            : input.apiKey === null
              ? null
              : this.secrets.seal(input.apiKey, apiKeyContext(input.connectionId)),
        enabled_models: input.enabledModels === undefined ? undefined : JSON.stringify(input.enabledModels),
        // Another address or key has not been tested yet.
        ...(reachChanged ? { status: 'untested', last_error: null } : {}),
        updated_at: new Date(this.now()),
      });
      if (!row) throw errors.notFound(NOT_FOUND);
      const changed = Object.keys(input).filter((name) => name !== 'connectionId');
      await this.audit.record(
        actor,
        {
          action: CONNECTION_UPDATE_ACTION,
          resourceType: 'model_connection',
          resourceId: row.id,
          outcome: 'success',
          metadata: { ...auditMetadata(row), changed },
        },
        trx,
      );
      return row;
    });
  }

  async deleteConnection(actor: Actor, connectionId: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const row = await repo.findConnection(trx, actor.userId, connectionId);
      if (!row || !(await repo.deleteConnection(trx, actor.userId, connectionId))) throw errors.notFound(NOT_FOUND);
      await this.audit.record(
        actor,
        {
          action: CONNECTION_DELETE_ACTION,
          resourceType: 'model_connection',
          resourceId: connectionId,
          outcome: 'success',
          metadata: auditMetadata(row),
        },
        trx,
      );
    });
  }

  /**
   * Reads the provider's model list for a saved connection (storing the outcome) or a draft. A
   * provider that fails is a failed test, not an error.
   */
  async testConnection(
    userId: string,
    input: TestInput,
  ): Promise<{ result: { ok: boolean; models: string[]; error: string | null; testedAt: Date }; connection: repo.ConnectionRow | null }> {
    const draft = input.kind !== undefined || input.baseUrl !== undefined || input.apiKey !== undefined;
    if ((input.connectionId === undefined) === !draft || (draft && input.kind === undefined)) {
      throw errors.invalidRequest('Give either connectionId, or a draft with kind (and baseUrl, apiKey).', [
        {
          path: input.connectionId === undefined ? '/body/kind' : '/body/connectionId',
          message: 'test a saved connection (connectionId) or a draft (kind, baseUrl, apiKey), not both',
        },
      ]);
    }
    let saved: repo.ConnectionRow | null = null;
    let target: ConnectionTarget;
    if (input.connectionId !== undefined) {
      saved = await this.connection(userId, input.connectionId);
      target = this.target(saved);
    } else {
      const kind = input.kind as ConnectionKind;
      if (!CONNECTION_KINDS.includes(kind))
        throw errors.invalidRequest('Unknown kind.', [{ path: '/body/kind', message: `must be one of ${CONNECTION_KINDS.join(', ')}` }]);
      if (kind === 'openai_compatible' && input.baseUrl === undefined) {
        throw errors.invalidRequest('An openai_compatible connection needs a base URL.', [
          { path: '/body/baseUrl', message: 'is required for kind openai_compatible' },
        ]);
      }
      if (input.baseUrl !== undefined) await this.checkBaseUrl(input.baseUrl);
      target = { kind, baseUrl: input.baseUrl ?? null, apiKey: input.apiKey ?? null };
    }
    const testedAt = new Date(this.now());
    let models: DiscoveredModel[] = [];
    let error: string | null = null;
    try {
      models = await discoverModels(target, this.outbound.fetcher({ timeoutMs: this.settings.testTimeoutMs, maxBytes: MAX_LIST_BYTES }));
    } catch (failure) {
      if (!(failure instanceof ModelProviderFailure)) throw failure;
      error = failure.message;
      this.log('model provider connection test failed', {
        connectionId: saved?.id ?? null,
        kind: target.kind,
        error: failure.message,
        detail: failure.detail,
      });
    }
    if (saved) {
      const updated = await repo.updateConnection(this.db, userId, saved.id, {
        status: error === null ? 'active' : 'error',
        last_error: error,
        last_tested_at: testedAt,
        // A failed test keeps the models found before (the provider may be down for a moment).
        ...(error === null ? { models: JSON.stringify(models) } : {}),
      });
      if (!updated) throw errors.notFound(NOT_FOUND);
      saved = updated;
    }
    return { result: { ok: error === null, models: models.map((m) => m.id), error, testedAt }, connection: saved };
  }

  private async checkBaseUrl(url: string): Promise<void> {
    const refused = await this.outbound.whyRefused(url);
    if (refused) throw errors.invalidRequest('The base URL is not allowed.', [{ path: '/body/baseUrl', message: refused }]);
  }
}

/** What the audit log keeps of a connection: never its key. */
function auditMetadata(row: repo.ConnectionRow): Record<string, unknown> {
  return { kind: row.kind, name: row.name, baseUrl: row.base_url, hasApiKey: row.api_key !== null, enabledModels: enabledOf(row) };
}
