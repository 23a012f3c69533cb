import type { components } from '../../../generated/api';
import type { Database } from '../../platform/db';
import { type Embedder, toVectorLiteral } from '../../platform/ai/embeddings';
import type { CapabilityService } from '../capabilities/service';
import type { ProjectService } from '../projects/service';
import * as repo from './repository';

type Request = components['schemas']['KnowledgeSearchRequest'];
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

/**
 * Knowledge search: full-text retrieval over every source the caller may read, fused with vector
 * retrieval (reciprocal rank fusion) when the capability is on and the database has pgvector.
 * Embeddings are kept up to date in the background by `indexPending`.
 */
export class KnowledgeService {
  constructor(
    private readonly db: Database,
    private readonly capabilities: CapabilityService,
    private readonly projects: ProjectService,
    private readonly embedder: Embedder,
    /** Whether the database has pgvector (detected at start). */
    readonly vectorAvailable: boolean,
  ) {}

  async vectorEnabled(): Promise<boolean> {
    return this.vectorAvailable && (await this.capabilities.isEnabled('vectorSearch'));
  }

  async search(userId: string, request: Omit<Request, 'userId' | 'accessToken'>) {
    if (request.projectId !== undefined) await this.projects.requireOwned(userId, request.projectId);
    const scope: repo.Scope = {
      userId,
      projectId: request.projectId,
      kinds: (request.sources ?? ['files', 'memory', 'notes', 'projects']).map((s) => SOURCE_KINDS[s]).sort(),
    };
    const limit = request.limit ?? 10;
    if (!(await this.vectorEnabled())) {
      const hits = await repo.lexicalHits(this.db, scope, request.query, limit);
      return { retrieval: 'lexical' as const, hits: hits.map((hit) => ({ hit, score: Number(hit.score) })) };
    }
    const [vector] = await this.embedder.embed([request.query]);
    const [lexical, semantic] = await Promise.all([
      repo.lexicalHits(this.db, scope, request.query, candidatesFor(limit), 'later'),
      repo.vectorHits(this.db, scope, request.query, toVectorLiteral(vector as number[]), candidatesFor(limit), 'later'),
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
    const snippets = await repo.cutSnippets(this.db, request.query, hits.map(({ hit }) => hit.snippet));
    return { retrieval: 'hybrid' as const, hits: hits.map(({ score, hit }, i) => ({ score, hit: { ...hit, snippet: snippets[i] as string } })) };
  }

  /**
   * Embeds records written since their last embedding, up to `maxBatches` batches; returns how
   * many. Safe on any number of instances (the same record embedded twice is written twice, equal).
   */
  async indexPending(maxBatches = Number.POSITIVE_INFINITY): Promise<number> {
    if (!(await this.vectorEnabled())) return 0;
    let total = 0;
    for (let batch = 0; batch < maxBatches; batch += 1) {
      const pending = await repo.pendingSources(this.db, INDEX_BATCH);
      if (pending.length === 0) return total;
      const vectors = await this.embedder.embed(pending.map((p) => p.text));
      await repo.upsertEmbeddings(this.db, pending.map((p, i) => ({ ...p, vector: toVectorLiteral(vectors[i] as number[]) })));
      total += pending.length;
    }
    return total;
  }

  deleteOrphans(): Promise<number> {
    return repo.deleteOrphanEmbeddings(this.db);
  }
}

/**
 * Runs `indexPending` every `intervalMs` (and orphan clean-up now and then) until stopped. Work not
 * done before a restart is found again by the next run: nothing is queued in memory.
 */
export class KnowledgeIndexer {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private lastCleanup = 0;

  constructor(
    private readonly knowledge: KnowledgeService,
    private readonly intervalMs: number,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    if (!this.knowledge.vectorAvailable || this.timer) return;
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs);
    this.timer.unref();
  }

  /** One pass (also what tests call to wait for the index). */
  runOnce(): Promise<void> {
    this.running ??= (async () => {
      try {
        // Bounded passes, so that shutdown never waits for a long backlog (the next pass continues it).
        await this.knowledge.indexPending(BATCHES_PER_PASS);
        if (Date.now() - this.lastCleanup > 60_000) {
          this.lastCleanup = Date.now();
          await this.knowledge.deleteOrphans();
        }
      } catch (error) {
        this.onError(error);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
