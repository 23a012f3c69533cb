import type { RequestInput } from '../../platform/api-types';
import type { Database } from '../../platform/db';
import { type Embedder, EmbeddingsFailure, toVectorLiteral } from '../../platform/ai/embeddings';
import type { CapabilityService } from '../capabilities/service';
import type { ProjectService } from '../projects/service';
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

/** What a KnowledgeService is built from. */
export interface KnowledgeServiceDeps {
  db: Database;
  capabilities: CapabilityService;
  projects: ProjectService;
  embedder: Embedder;
  /** Whether the database has pgvector (detected at start). */
  vectorAvailable: boolean;
  log?: HealthLog;
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
  readonly vectorAvailable: boolean;
  private readonly log: HealthLog;

  constructor({ db, capabilities, projects, embedder, vectorAvailable, log = () => undefined }: KnowledgeServiceDeps) {
    this.db = db;
    this.capabilities = capabilities;
    this.projects = projects;
    this.embedder = embedder;
    this.vectorAvailable = vectorAvailable;
    this.log = log;
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
        this.log('warn', 'embeddings failed; knowledge search answers from full-text retrieval', { model: this.embedder.name, error: message, detail });
      }
      Object.assign(this.healthState, { state: 'failing', lastError: message, consecutiveFailures: this.healthState.consecutiveFailures + 1 });
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
  async search(userId: string, request: Request, withText = false): Promise<{ retrieval: 'hybrid' | 'lexical'; note: string | undefined; hits: Array<{ hit: repo.Hit; score: number; text?: string }> }> {
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
        return { retrieval: 'lexical' as const, hits: await this.cut(request.query, hits.map((hit) => ({ hit, score: Number(hit.score) }))), note };
      }
      const hits = await repo.lexicalHits(this.db, scope, request.query, limit);
      return { retrieval: 'lexical' as const, hits: hits.map((hit) => ({ hit, score: Number(hit.score) })), note };
    };
    if (!(await this.vectorEnabled())) return lexicalOnly();
    let vector: number[];
    try {
      [vector] = (await this.embed([request.query], 'query')) as [number[]];
    } catch (error) {
      // Embeddings never fail a search: it answers from full-text retrieval and says why.
      const reason = error instanceof EmbeddingsFailure ? error.message : 'The embeddings failed.';
      return lexicalOnly(`Vector retrieval was skipped: ${reason}`);
    }
    const embedding = { model: this.embedder.name, vector: toVectorLiteral(vector), dimensions: vector.length };
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
    const snippets = await repo.cutSnippets(this.db, query, hits.map(({ hit }) => hit.snippet));
    return hits.map(({ score, hit }, i) => ({ score, hit: { ...hit, snippet: snippets[i] as string }, text: hit.snippet }));
  }

  /**
   * What a chat turn is grounded in: the caller's best `limit` results for `query` (the same
   * retrieval and ranking as `search`, over what the caller may read: their own records and the
   * files shared with them), each with the text of its passage. `query` is cut to the search's
   * longest query. Embeddings that fail make it lexical, as search does; other failures throw.
   */
  async passages(userId: string, query: string, options: { limit: number; sources?: Request['sources'] }): Promise<{ retrieval: 'hybrid' | 'lexical'; passages: KnowledgePassage[] }> {
    const { retrieval, hits } = await this.search(userId, { query: Array.from(query.slice(0, 2 * MAX_QUERY_CHARS)).slice(0, MAX_QUERY_CHARS).join(''), limit: options.limit, sources: options.sources }, true);
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

  /**
   * Embeds records written since their last embedding, or embedded by another model (a change
   * of EMBEDDINGS_MODEL or EMBEDDINGS_DIMENSIONS re-embeds everything in the background), up to
   * `maxBatches` batches; returns how many. Safe on any number of instances (the same record embedded twice is written twice, equal).
   */
  async indexPending(maxBatches = Number.POSITIVE_INFINITY): Promise<number> {
    if (!(await this.vectorEnabled())) return 0;
    let total = 0;
    for (let batch = 0; batch < maxBatches; batch += 1) {
      const pending = await repo.pendingSources(this.db, this.embedder.name, INDEX_BATCH);
      if (pending.length === 0) return total;
      const vectors = await this.embed(pending.map((p) => p.text), 'index');
      await repo.upsertEmbeddings(this.db, this.embedder.name, pending.map((p, i) => ({ ...p, vector: toVectorLiteral(vectors[i] as number[]) })));
      total += pending.length;
    }
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
