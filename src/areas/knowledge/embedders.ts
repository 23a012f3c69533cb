import type { Transaction } from 'kysely';
import type { Database, DB } from '../../platform/db';
import type { ConnectionEmbedder } from '../../platform/ai/connections';
import { type Embedder, EmbeddingsFailure } from '../../platform/ai/embeddings';
import type { ModelInfo } from '../../platform/ai/models';
import { uuidv7 } from '../../platform/ids';
import type { BudgetGate, UsageKind } from '../billing/service';
import type { ModelConnectionService, ModelService } from '../models/service';
import type { SettingsService } from '../settings/service';

/** The state of the embeddings provider as the last call found it. */
export interface EmbeddingsHealth {
  /** `unused` without pgvector; `unknown` until the first call; `failing` while the last one failed. */
  state: 'unused' | 'unknown' | 'ok' | 'failing';
  /** What the last failure said (no address), null once a call succeeds. */
  lastError: string | null;
  consecutiveFailures: number;
}

export type HealthLog = (level: 'info' | 'warn', message: string, meta: Record<string, unknown>) => void;

/** The embedder that serves one user: the deployment's, their connection's model, or none for now (why). */
export type UserEmbedder =
  | { kind: 'deployment' }
  | { kind: 'connection'; embedder: ConnectionEmbedder; connectionId: string; info: ModelInfo }
  | { kind: 'unavailable'; reason: string };

/** How users' own embeddings models are called (the models area's service, the settings' choice). */
export interface UserEmbeddingsDeps {
  models: Pick<ModelService, 'connectionEmbedder'>;
  /** Where each call's outcome is recorded on its connection. */
  connections: Pick<ModelConnectionService, 'reportConnectionOutcome'>;
  settings: Pick<SettingsService, 'embeddingsModel'>;
  /** Usage through a user's own key is recorded with the connection, never charged. */
  billing: Pick<BudgetGate, 'charge'>;
  /** How long a background batch and a search's query may take. */
  timeoutMs: number;
  queryTimeoutMs: number;
  /** A failing connection's records wait from `baseMs`, doubling up to `maxMs`, before they are tried again. */
  backoff: { baseMs: number; maxMs: number };
}

/** What KnowledgeEmbedders are built from. */
export interface KnowledgeEmbeddersDeps {
  db: Database;
  /** The deployment's embedder. */
  embedder: Embedder;
  /** Users' own embeddings models; without them everyone uses `embedder`. */
  userEmbeddings: UserEmbeddingsDeps | null;
  log: HealthLog;
  now: () => number;
}

/**
 * The embedders knowledge search and indexing call: the deployment's (whose health `/readyz`
 * shows) and users' own connection models (whose failures make their records wait, backing off).
 */
export class KnowledgeEmbedders {
  private readonly db: Database;
  readonly deployment: Embedder;
  private readonly userEmbeddings: UserEmbeddingsDeps | null;
  private readonly log: HealthLog;
  private readonly now: () => number;
  private readonly healthState: EmbeddingsHealth = { state: 'unknown', lastError: null, consecutiveFailures: 0 };
  /** Users' embedders whose indexing failed, by `attempt` (see repo.PendingSource): when to try again. */
  private readonly failingConnections = new Map<string, { failures: number; retryAt: number }>();

  constructor({ db, embedder, userEmbeddings, log, now }: KnowledgeEmbeddersDeps) {
    this.db = db;
    this.deployment = embedder;
    this.userEmbeddings = userEmbeddings;
    this.log = log;
    this.now = now;
  }

  /** The deployment's embeddings provider as the last call found it. */
  get health(): Readonly<EmbeddingsHealth> {
    return this.healthState;
  }

  /** Embeds through the deployment's provider, recording its health; a failure is logged when it starts or changes, at warn, once. */
  async embed(texts: string[], purpose: 'query' | 'index'): Promise<number[][]> {
    try {
      const vectors = await this.deployment.embed(texts, purpose);
      if (this.healthState.state === 'failing') this.log('info', 'embeddings recovered', { model: this.deployment.name });
      Object.assign(this.healthState, { state: 'ok', lastError: null, consecutiveFailures: 0 });
      return vectors;
    } catch (error) {
      const message = error instanceof EmbeddingsFailure ? error.message : `The embeddings failed: ${(error as Error).message}`;
      if (message !== this.healthState.lastError) {
        const detail = error instanceof EmbeddingsFailure && error.detail !== error.message ? error.detail : undefined;
        this.log('warn', 'embeddings failed; knowledge search answers from full-text retrieval', {
          model: this.deployment.name,
          error: message,
          detail,
        });
      }
      Object.assign(this.healthState, {
        state: 'failing',
        lastError: message,
        consecutiveFailures: this.healthState.consecutiveFailures + 1,
      });
      throw error;
    }
  }

  /** The user's chosen embeddings model (a connection's), or null for the deployment's embedder. */
  async chosenModel(userId: string): Promise<string | null> {
    return this.userEmbeddings ? this.userEmbeddings.settings.embeddingsModel(userId) : null;
  }

  /** The embedder due for `userId` when they chose `modelId` (null: the deployment's). */
  async embedderOf(userId: string, modelId: string | null): Promise<UserEmbedder> {
    const users = this.userEmbeddings;
    if (modelId === null || users === null) return { kind: 'deployment' };
    const found = await users.models.connectionEmbedder(userId, modelId, {
      timeoutMs: users.timeoutMs,
      queryTimeoutMs: users.queryTimeoutMs,
    });
    if (found.state === 'fallback') return { kind: 'deployment' };
    if (found.state === 'problem') return { kind: 'unavailable', reason: found.message };
    return { kind: 'connection', embedder: found.embedder, connectionId: found.connectionId, info: found.info };
  }

  /**
   * Embeds through the user's connection, recording the outcome on the connection (its `status`
   * and `lastError` tell the user why their search is lexical) and the tokens in the usage ledger
   * with the connection (cost 0): in `record`'s transaction when given (the indexer's write).
   */
  async embedThrough(
    userId: string,
    chosen: Extract<UserEmbedder, { kind: 'connection' }>,
    texts: string[],
    purpose: 'query' | 'index',
    record?: (trx: Transaction<DB>, vectors: number[][]) => Promise<void>,
  ): Promise<number[][]> {
    const users = this.userEmbeddings as UserEmbeddingsDeps;
    let result: { vectors: number[][]; tokens: number };
    try {
      result = await chosen.embedder.embedCounted(texts, purpose);
    } catch (error) {
      const message = error instanceof EmbeddingsFailure ? error.message : `The embeddings failed: ${(error as Error).message}`;
      await users.connections.reportConnectionOutcome(userId, chosen.connectionId, message);
      throw error instanceof EmbeddingsFailure ? error : new EmbeddingsFailure(message);
    }
    await users.connections.reportConnectionOutcome(userId, chosen.connectionId, null);
    const kind: UsageKind = purpose === 'query' ? 'knowledge.search' : 'knowledge.index';
    const at = new Date(this.now());
    await this.db.transaction().execute(async (trx) => {
      await record?.(trx, result.vectors);
      await users.billing.charge(trx, {
        userId,
        kind,
        resourceId: uuidv7(at.getTime()),
        model: chosen.info,
        connectionId: chosen.connectionId,
        usage: { inputTokens: result.tokens, outputTokens: 0 },
        at,
      });
    });
    return result.vectors;
  }

  /** The `attempt`s of users' embedders still waiting after a failure (forgetting long-past ones). */
  waitingConnections(): string[] {
    const now = this.now();
    const maxMs = this.userEmbeddings?.backoff.maxMs ?? 0;
    for (const [attempt, { retryAt }] of this.failingConnections) {
      if (retryAt < now - 2 * maxMs) this.failingConnections.delete(attempt);
    }
    return [...this.failingConnections].filter(([, { retryAt }]) => retryAt > now).map(([attempt]) => attempt);
  }

  /** A user's embedder failed: its records wait longer each time it fails again. */
  connectionFailed(attempt: string): void {
    const { baseMs, maxMs } = (this.userEmbeddings as UserEmbeddingsDeps).backoff;
    const failures = (this.failingConnections.get(attempt)?.failures ?? 0) + 1;
    const waitMs = Math.min(baseMs * 2 ** Math.min(failures - 1, 30), Math.max(maxMs, baseMs));
    this.failingConnections.set(attempt, { failures, retryAt: this.now() + waitMs });
  }

  /** A user's embedder worked again: its records no longer wait. */
  connectionRecovered(attempt: string): void {
    this.failingConnections.delete(attempt);
  }
}
