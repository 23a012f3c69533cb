import type { RequestInput } from '../../platform/api-types';
import type { Transaction } from 'kysely';
import type { Database, DB } from '../../platform/db';
import type { ConnectionEmbedder } from '../../platform/ai/connections';
import { type Embedder, EmbeddingsFailure, toVectorLiteral } from '../../platform/ai/embeddings';
import type { ModelInfo } from '../../platform/ai/models';
import { uuidv7 } from '../../platform/ids';
import type { BudgetGate, UsageKind } from '../billing/service';
import type { CapabilityService } from '../capabilities/service';
import type { ModelConnectionService, ModelService } from '../models/service';
import type { ProjectService } from '../projects/service';
import type { SettingsService } from '../settings/service';
import * as repo from './repository';

type Request = RequestInput<'KnowledgeSearchRequest'>;
const SOURCE_KINDS: Record<NonNullable<Request['sources']>[number], repo.SourceKind> = {
  files: 'file',
  memory: 'memory',
  notes: 'note',
  projects: 'project',
};

/** Reciprocal rank fusion's constant: how much the first ranks dominate. */
const RRF_K = 60;
/**
 * How many candidates each retrieval gives the fusion: twice the page (at least 20), as hybrid
 * search engines do, rather than a fixed 50 that made short pages pay for long ones.
 */
const candidatesFor = (limit: number) => Math.max(2 * limit, 20);
const INDEX_BATCH = 64;
const BATCHES_PER_PASS = 16;

const keyOf = (hit: repo.Hit) => `${hit.kind}|${hit.id}|${hit.seq ?? ''}`;
const byScoreThenKey = (a: { score: number; hit: repo.Hit }, b: { score: number; hit: repo.Hit }) =>
  b.score - a.score || (keyOf(a.hit) < keyOf(b.hit) ? -1 : keyOf(a.hit) > keyOf(b.hit) ? 1 : 0);

/** The longest query a search takes (the document's `KnowledgeSearchRequest.query`). */
const MAX_QUERY_CHARS = 500;

/** A result of `passages`: a search result with the whole text its snippet was cut from. */
export interface KnowledgePassage {
  kind: repo.SourceKind;
  id: string;
  title: string;
  /** Cut as search cuts it (matched words between « and »). */
  snippet: string;
  text: string;
  projectId: string | null;
  fileId: string | null;
  chunkIndex: number | null;
  startOffset: number | null;
  endOffset: number | null;
}

/** The state of the embeddings provider as the last call found it. */
export interface EmbeddingsHealth {
  /** `unused` without pgvector; `unknown` until the first call; `failing` while the last one failed. */
  state: 'unused' | 'unknown' | 'ok' | 'failing';
  /** What the last failure said (no address), null once a call succeeds. */
  lastError: string | null;
  consecutiveFailures: number;
}

type HealthLog = (level: 'info' | 'warn', message: string, meta: Record<string, unknown>) => void;

/** The embedder that serves one user: the deployment's, their connection's model, or none for now (why). */
type UserEmbedder =
  | { kind: 'deployment' }
  | { kind: 'connection'; embedder: ConnectionEmbedder; connectionId: string; info: ModelInfo }
  | { kind: 'unavailable'; reason: string };

/** How users' own embeddings models are called (the models area's services, the settings' choice). */
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

/** What a KnowledgeService is built from. */
export interface KnowledgeServiceDeps {
  db: Database;
  capabilities: CapabilityService;
  projects: ProjectService;
  embedder: Embedder;
  /** Users' own embeddings models (their setting `defaultEmbeddingsModel`); without it everyone uses `embedder`. */
  userEmbeddings?: UserEmbeddingsDeps;
  /** Whether the database has pgvector (detected at start). */
  vectorAvailable: boolean;
  log?: HealthLog;
  now?: () => number;
}

/**
 * Knowledge search: full-text retrieval over every source the caller may read, fused with vector
 * retrieval (reciprocal rank fusion) when the capability is on and the database has pgvector.
 * Embeddings are kept up to date in the background by `indexPending`.
 */
export class KnowledgeService {
  private readonly db: Database;
  private readonly capabilities: CapabilityService;
  private readonly projects: ProjectService;
  private readonly embedder: Embedder;
  private readonly userEmbeddings: UserEmbeddingsDeps | null;
  readonly vectorAvailable: boolean;
  private readonly log: HealthLog;
  private readonly now: () => number;
  /** Users' embedders whose indexing failed, by `attempt` (see repo.PendingSource): when to try again. */
  private readonly failingConnections = new Map<string, { failures: number; retryAt: number }>();

  constructor({
    db,
    capabilities,
    projects,
    embedder,
    userEmbeddings,
    vectorAvailable,
    log = () => undefined,
    now = Date.now,
  }: KnowledgeServiceDeps) {
    this.db = db;
    this.capabilities = capabilities;
    this.projects = projects;
    this.embedder = embedder;
    this.userEmbeddings = userEmbeddings ?? null;
    this.vectorAvailable = vectorAvailable;
    this.log = log;
    this.now = now;
  }

  private readonly healthState: EmbeddingsHealth = { state: 'unknown', lastError: null, consecutiveFailures: 0 };

  /** The embeddings provider's health, for /readyz (it never makes the instance unready: search answers lexically). */
  get embeddingsHealth(): Readonly<EmbeddingsHealth> {
    return this.vectorAvailable ? this.healthState : { ...this.healthState, state: 'unused' };
  }

  /** Embeds through the provider, recording its health; a failure is logged when it starts or changes, at warn, once. */
  private async embed(texts: string[], purpose: 'query' | 'index'): Promise<number[][]> {
    try {
      const vectors = await this.embedder.embed(texts, purpose);
      if (this.healthState.state === 'failing') this.log('info', 'embeddings recovered', { model: this.embedder.name });
      Object.assign(this.healthState, { state: 'ok', lastError: null, consecutiveFailures: 0 });
      return vectors;
    } catch (error) {
      const message = error instanceof EmbeddingsFailure ? error.message : `The embeddings failed: ${(error as Error).message}`;
      if (message !== this.healthState.lastError) {
        const detail = error instanceof EmbeddingsFailure && error.detail !== error.message ? error.detail : undefined;
        this.log('warn', 'embeddings failed; knowledge search answers from full-text retrieval', {
          model: this.embedder.name,
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

  async vectorEnabled(): Promise<boolean> {
    return this.vectorAvailable && (await this.capabilities.isEnabled('vectorSearch'));
  }

  /**
   * The caller's best results for `request`. With `withText`, each hit also carries the whole text
   * its snippet was cut from (`text`: the chunk, the note, the memory item, the project's fields).
   */
  async search(
    userId: string,
    request: Request,
    withText = false,
  ): Promise<{ retrieval: 'hybrid' | 'lexical'; note: string | undefined; hits: Array<{ hit: repo.Hit; score: number; text?: string }> }> {
    await this.projects.requireOwnedIfNamed(userId, request.projectId);
    const scope: repo.Scope = {
      userId,
      projectId: request.projectId,
      kinds: (request.sources ?? ['files', 'memory', 'notes', 'projects']).map((s) => SOURCE_KINDS[s]).sort(),
    };
    const limit = request.limit ?? 10;
    const lexicalOnly = async (note?: string) => {
      if (withText) {
        const hits = await repo.lexicalHits(this.db, scope, request.query, limit, 'later');
        return {
          retrieval: 'lexical' as const,
          hits: await this.cut(
            request.query,
            hits.map((hit) => ({ hit, score: Number(hit.score) })),
          ),
          note,
        };
      }
      const hits = await repo.lexicalHits(this.db, scope, request.query, limit);
      return { retrieval: 'lexical' as const, hits: hits.map((hit) => ({ hit, score: Number(hit.score) })), note };
    };
    if (!(await this.vectorEnabled())) return lexicalOnly();
    const chosen = await this.embedderOf(userId, await this.chosenModel(userId));
    if (chosen.kind === 'unavailable') return lexicalOnly(`Vector retrieval was skipped: ${chosen.reason}`);
    let vector: number[];
    try {
      [vector] = (
        chosen.kind === 'connection'
          ? await this.embedThrough(userId, chosen, [request.query], 'query')
          : await this.embed([request.query], 'query')
      ) as [number[]];
    } catch (error) {
      // Embeddings never fail a search: it answers from full-text retrieval and says why.
      const reason = error instanceof EmbeddingsFailure ? error.message : 'The embeddings failed.';
      return lexicalOnly(`Vector retrieval was skipped: ${reason}`);
    }
    // Only vectors of the same embedder (and size) are compared: the user's connection model's, or the deployment's.
    const model = chosen.kind === 'connection' ? chosen.embedder.name : this.embedder.name;
    const embedding = { model, vector: toVectorLiteral(vector), dimensions: vector.length };
    const [lexical, semantic] = await Promise.all([
      repo.lexicalHits(this.db, scope, request.query, candidatesFor(limit), 'later'),
      repo.vectorHits(this.db, scope, request.query, embedding, candidatesFor(limit), 'later'),
    ]);
    const fused = new Map<string, { score: number; hit: repo.Hit }>();
    for (const list of [lexical, semantic]) {
      list.forEach((hit, rank) => {
        const entry = fused.get(keyOf(hit)) ?? { score: 0, hit };
        entry.score += 1 / (RRF_K + rank + 1);
        fused.set(keyOf(hit), entry);
      });
    }
    const hits = [...fused.values()].sort(byScoreThenKey).slice(0, limit);
    // Snippets are cut for the hits returned only, not for every candidate.
    const cut = await this.cut(request.query, hits);
    return { retrieval: 'hybrid' as const, note: undefined, hits: withText ? cut : cut.map(({ hit, score }) => ({ hit, score })) };
  }

  /** Hits whose `snippet` holds their whole text, with their snippets cut and that text kept as `text`. */
  private async cut(query: string, hits: Array<{ hit: repo.Hit; score: number }>) {
    const snippets = await repo.cutSnippets(
      this.db,
      query,
      hits.map(({ hit }) => hit.snippet),
    );
    return hits.map(({ score, hit }, i) => ({ score, hit: { ...hit, snippet: snippets[i] as string }, text: hit.snippet }));
  }

  /**
   * What a chat turn is grounded in: the caller's best `limit` results for `query` (the same
   * retrieval and ranking as `search`, over what the caller may read: their own records and the
   * files shared with them), each with the text of its passage. `query` is cut to the search's
   * longest query. Embeddings that fail make it lexical, as search does; other failures throw.
   */
  async passages(
    userId: string,
    query: string,
    options: { limit: number; sources?: Request['sources'] },
  ): Promise<{ retrieval: 'hybrid' | 'lexical'; passages: KnowledgePassage[] }> {
    const { retrieval, hits } = await this.search(
      userId,
      {
        query: Array.from(query.slice(0, 2 * MAX_QUERY_CHARS))
          .slice(0, MAX_QUERY_CHARS)
          .join(''),
        limit: options.limit,
        sources: options.sources,
      },
      true,
    );
    return {
      retrieval,
      passages: hits.map(({ hit, text }) => ({
        kind: hit.kind,
        id: hit.id,
        title: hit.title,
        snippet: hit.snippet,
        text: text ?? hit.snippet,
        projectId: hit.project_id,
        fileId: hit.file_id,
        chunkIndex: hit.seq,
        startOffset: hit.start_offset,
        endOffset: hit.end_offset,
      })),
    };
  }

  /** The user's chosen embeddings model (a connection's), or null for the deployment's embedder. */
  private async chosenModel(userId: string): Promise<string | null> {
    return this.userEmbeddings ? this.userEmbeddings.settings.embeddingsModel(userId) : null;
  }

  /** The embedder due for `userId` when they chose `modelId` (null: the deployment's). */
  private async embedderOf(userId: string, modelId: string | null): Promise<UserEmbedder> {
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
  private async embedThrough(
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
  private waitingConnections(): string[] {
    const now = this.now();
    const maxMs = this.userEmbeddings?.backoff.maxMs ?? 0;
    for (const [attempt, { retryAt }] of this.failingConnections) {
      if (retryAt < now - 2 * maxMs) this.failingConnections.delete(attempt);
    }
    return [...this.failingConnections].filter(([, { retryAt }]) => retryAt > now).map(([attempt]) => attempt);
  }

  private connectionFailed(attempt: string): void {
    const { baseMs, maxMs } = (this.userEmbeddings as UserEmbeddingsDeps).backoff;
    const failures = (this.failingConnections.get(attempt)?.failures ?? 0) + 1;
    const waitMs = Math.min(baseMs * 2 ** Math.min(failures - 1, 30), Math.max(maxMs, baseMs));
    this.failingConnections.set(attempt, { failures, retryAt: this.now() + waitMs });
  }

  /**
   * Embeds records written since their last embedding, or embedded by another embedder than their
   * owner's (a change of EMBEDDINGS_MODEL or EMBEDDINGS_DIMENSIONS re-embeds everything; a change
   * of a user's `defaultEmbeddingsModel`, or the deletion of its connection, re-embeds that
   * user's records), in the background, up to `maxBatches` batches; returns how many. Each
   * batch is embedded per embedder: a user's failing connection waits (backing off) without
   * holding up anyone else's records; a failing deployment embedder fails the pass once the
   * others are done (the indexer backs off). Safe on any number of instances (the same record
   * embedded twice is written twice, equal).
   */
  async indexPending(maxBatches = Number.POSITIVE_INFINITY): Promise<number> {
    if (!(await this.vectorEnabled())) return 0;
    const skip = new Set(this.waitingConnections());
    let deploymentFailure: unknown = null;
    let total = 0;
    for (let batch = 0; batch < maxBatches; batch += 1) {
      const pending = await repo.pendingSources(this.db, this.embedder.name, [...skip], INDEX_BATCH);
      if (pending.length === 0) break;
      const groups = new Map<string, repo.PendingSource[]>();
      for (const source of pending) groups.set(source.attempt, [...(groups.get(source.attempt) ?? []), source]);
      for (const [attempt, sources] of groups) {
        const { model, owner } = sources[0] as repo.PendingSource;
        const rows = (vectors: number[][]) => sources.map((p, i) => ({ ...p, vector: toVectorLiteral(vectors[i] as number[]) }));
        if (model === this.embedder.name) {
          try {
            const vectors = await this.embed(
              sources.map((p) => p.text),
              'index',
            );
            await repo.upsertEmbeddings(this.db, model, rows(vectors));
            total += sources.length;
          } catch (error) {
            deploymentFailure = error;
            skip.add(attempt);
          }
          continue;
        }
        const chosen = await this.embedderOf(owner, model.slice('connection:'.length));
        if (chosen.kind !== 'connection' || chosen.embedder.name !== model) {
          // Changed since the batch was read (the connection deleted: the next pass sees the deployment's due), or unusable now.
          skip.add(attempt);
          if (chosen.kind === 'unavailable') {
            this.connectionFailed(attempt);
            this.log('info', "a user's embeddings model cannot be used; their records wait", {
              userId: owner,
              model,
              error: chosen.reason,
            });
          }
          continue;
        }
        try {
          await this.embedThrough(
            owner,
            chosen,
            sources.map((p) => p.text),
            'index',
            (trx, vectors) => repo.upsertEmbeddings(trx, model, rows(vectors)),
          );
          this.failingConnections.delete(attempt);
          total += sources.length;
        } catch (error) {
          skip.add(attempt);
          this.connectionFailed(attempt);
          this.log('info', "embeddings through a user's connection failed; their records wait", {
            userId: owner,
            model,
            error: (error as Error).message,
          });
        }
      }
    }
    if (deploymentFailure !== null) throw deploymentFailure;
    return total;
  }

  deleteOrphans(): Promise<number> {
    return repo.deleteOrphanEmbeddings(this.db);
  }
}

/** Timers, injectable so that tests drive the indexer's schedule. */
export interface IndexerTimers {
  setTimeout(run: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: IndexerTimers = {
  setTimeout: (run, ms) => setTimeout(run, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** What a KnowledgeIndexer is built from. */
export interface KnowledgeIndexerDeps {
  knowledge: KnowledgeService;
  intervalMs: number;
  onError: (error: unknown, retryInMs: number, failures: number) => void;
  maxBackoffMs?: number;
  timers?: IndexerTimers;
}

/**
 * Runs `indexPending` every `intervalMs` (and orphan clean-up now and then) until stopped. Work not
 * done before a restart is found again by the next run: nothing is queued in memory. While passes
 * fail, the wait doubles from `intervalMs` up to `maxBackoffMs`; a pass that succeeds resets it.
 */
export class KnowledgeIndexer {
  private timer: unknown = null;
  private started = false;
  private running: Promise<void> | null = null;
  private lastCleanup = 0;
  private failures = 0;

  private readonly knowledge: KnowledgeService;
  private readonly intervalMs: number;
  private readonly onError: (error: unknown, retryInMs: number, failures: number) => void;
  private readonly maxBackoffMs: number;
  private readonly timers: IndexerTimers;

  constructor({ knowledge, intervalMs, onError, maxBackoffMs = Math.max(intervalMs, 300_000), timers = realTimers }: KnowledgeIndexerDeps) {
    this.knowledge = knowledge;
    this.intervalMs = intervalMs;
    this.onError = onError;
    this.maxBackoffMs = maxBackoffMs;
    this.timers = timers;
  }

  /** Consecutive failed passes, and the wait before the next pass. */
  get status(): { consecutiveFailures: number; nextDelayMs: number } {
    return { consecutiveFailures: this.failures, nextDelayMs: this.nextDelay() };
  }

  private nextDelay(): number {
    if (this.failures === 0) return this.intervalMs;
    return Math.min(this.intervalMs * 2 ** Math.min(this.failures, 30), Math.max(this.maxBackoffMs, this.intervalMs));
  }

  start(): void {
    if (!this.knowledge.vectorAvailable || this.started) return;
    this.started = true;
    this.schedule();
  }

  private schedule(): void {
    if (!this.started) return;
    this.timer = this.timers.setTimeout(() => {
      this.timer = null;
      void this.runOnce().then(() => this.schedule());
    }, this.nextDelay());
  }

  /** One pass (also what tests call to wait for the index). */
  runOnce(): Promise<void> {
    this.running ??= (async () => {
      try {
        // Bounded passes, so that shutdown never waits for a long backlog (the next pass continues it).
        await this.knowledge.indexPending(BATCHES_PER_PASS);
        this.failures = 0;
        if (Date.now() - this.lastCleanup > 60_000) {
          this.lastCleanup = Date.now();
          await this.knowledge.deleteOrphans();
        }
      } catch (error) {
        this.failures += 1;
        this.onError(error, this.nextDelay(), this.failures);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  async stop(): Promise<void> {
    this.started = false;
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }
}
