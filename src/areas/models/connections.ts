import type { RequestInput } from '../../platform/api-types';
import {
  CONNECTION_KINDS,
  type ConnectionKind,
  type ConnectionTarget,
  type DiscoveredModel,
  discoverModels,
} from '../../platform/ai/connections';
import { type FailureLog, ModelProviderFailure } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { Outbound } from '../../platform/net/outbound';
import type { PageRequest } from '../../platform/pagination';
import type { SealedColumn, Secrets } from '../../platform/secrets';
import type { Actor, AuditService } from '../audit/service';
import * as repo from './repository';

type CreateInput = RequestInput<'ModelConnectionCreateRequest'>;
type UpdateInput = RequestInput<'ModelConnectionUpdateRequest'>;
type TestInput = RequestInput<'ModelConnectionTestRequest'>;

export const CONNECTION_CREATE_ACTION = 'model_provider.connection.create';
export const CONNECTION_UPDATE_ACTION = 'model_provider.connection.update';
export const CONNECTION_DELETE_ACTION = 'model_provider.connection.delete';

/** What a connection's API key is sealed for. */
export const apiKeyContext = (connectionId: string) => `model-connection-api-key:${connectionId}`;

/** The column holding sealed API keys, for key rotation. */
export const sealedColumns: SealedColumn[] = [{ table: 'model_connections', idColumn: 'id', column: 'api_key', context: apiKeyContext }];

const NOT_FOUND = 'Model provider connection not found.';
const MAX_LIST_BYTES = 4 * 1024 * 1024;

/** The discovered models stored with a connection. */
export const discoveredOf = (row: Pick<repo.ConnectionRow, 'models'>): DiscoveredModel[] =>
  (row.models as unknown as DiscoveredModel[] | null) ?? [];
export const enabledOf = (row: Pick<repo.ConnectionRow, 'enabled_models'>): string[] =>
  (row.enabled_models as unknown as string[] | null) ?? [];

export interface ModelConnectionSettings {
  /** How long a connection test (reading the model list) may take. */
  testTimeoutMs: number;
  /** Connections per user. */
  connectionsPerUser: number;
}

export interface ModelConnectionDeps {
  db: Database;
  secrets: Secrets;
  /** The guard of every base URL a user gives, and of the tests' requests. */
  outbound: Outbound;
  audit: AuditService;
  settings: ModelConnectionSettings;
  /** Where failed tests are logged (never with the key). */
  log?: FailureLog;
  now?: () => number;
}

/**
 * Users' connections to their own model providers (bring your own key): their CRUD, audited and
 * with the key sealed; testing one (reading the provider's model list); and the state calls
 * through one leave on it.
 */
export class ModelConnectionService {
  private readonly db: Database;
  private readonly secrets: Secrets;
  private readonly outbound: Outbound;
  private readonly audit: AuditService;
  private readonly settings: ModelConnectionSettings;
  private readonly log: FailureLog;
  private readonly now: () => number;

  constructor({ db, secrets, outbound, audit, settings, log = () => undefined, now = Date.now }: ModelConnectionDeps) {
    this.db = db;
    this.secrets = secrets;
    this.outbound = outbound;
    this.audit = audit;
    this.settings = settings;
    this.log = log;
    this.now = now;
  }

  /** The user's connection, or undefined. */
  find(userId: string, connectionId: string): Promise<repo.ConnectionRow | undefined> {
    return repo.findConnection(this.db, userId, connectionId);
  }

  /** The user's connection; `404` otherwise. */
  async connection(userId: string, connectionId: string): Promise<repo.ConnectionRow> {
    const row = await this.find(userId, connectionId);
    if (!row) throw errors.notFound(NOT_FOUND);
    return row;
  }

  connections(userId: string, page: PageRequest) {
    return repo.connectionList.page(this.db, { ownerUserId: userId }, page);
  }

  /** What calls through a connection reach: its kind, its base URL and its key (opened). */
  target(row: repo.ConnectionRow): ConnectionTarget {
    return {
      kind: row.kind as ConnectionKind,
      baseUrl: row.base_url,
      apiKey: row.api_key === null ? null : this.secrets.open(row.api_key, apiKeyContext(row.id)),
    };
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

  /**
   * Records what a call through a connection found, for its owner to see (`status`, `lastError`):
   * a failure marks it `error`; a success clears an earlier error. Writes only on a change.
   */
  async reportConnectionOutcome(userId: string, connectionId: string, error: string | null): Promise<void> {
    await repo.markConnection(this.db, userId, connectionId, error);
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
