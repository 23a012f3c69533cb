import type { RequestInput } from '../../platform/api-types';
import { sharedProjects } from '../../platform/db/access';
import type { Database } from '../../platform/db';
import { type Embedder, EmbeddingsFailure, toVectorLiteral } from '../../platform/ai/embeddings';
import type { CapabilityService } from '../capabilities/service';
import type { ProjectService } from '../projects/service';
import { type EmbeddingsHealth, type HealthLog, KnowledgeEmbedders, type UserEmbeddingsDeps } from './embedders';
import * as repo from './repository';

export type { EmbeddingsHealth, UserEmbeddingsDeps } from './embedders';
export type { Within as KnowledgeWithin } from './repository';

type Request = RequestInput<'KnowledgeSearchRequest'>;
const SOURCE_KINDS: Record<NonNullable<Request['sources']>[number], repo.SourceKind> = {
  files: 'file',
  memory: 'memory',
  notes: 'note',
  projects: 'project',
};

/** Reciprocal rank fusion's constant: how much the first ranks dominate. */
const RRF_K = 60;
/** How many candidates each retrieval gives the fusion: twice the page, at least 20. */
const candidatesFor = (limit: number) => Math.max(2 * limit, 20);
const INDEX_BATCH = 64;

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
  private readonly embedders: KnowledgeEmbedders;
  readonly vectorAvailable: boolean;
  private readonly log: HealthLog;

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
    this.embedders = new KnowledgeEmbedders({ db, embedder, userEmbeddings: userEmbeddings ?? null, log, now });
    this.vectorAvailable = vectorAvailable;
    this.log = log;
  }

  /** The embeddings provider's health, for /readyz (it never makes the instance unready: search answers lexically). */
  get embeddingsHealth(): Readonly<EmbeddingsHealth> {
    const health = this.embedders.health;
    return this.vectorAvailable ? health : { ...health, state: 'unused' };
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
    within: repo.Within | null = null,
  ): Promise<{ retrieval: 'hybrid' | 'lexical'; note: string | undefined; hits: Array<{ hit: repo.Hit; score: number; text?: string }> }> {
    // A project of the caller's or one shared with them (404 otherwise).
    if (request.projectId !== undefined) await this.projects.readable(userId, request.projectId);
    const scope: repo.Scope = {
      userId,
      projectId: request.projectId,
      shared: await sharedProjects(this.db, userId),
      kinds: (request.sources ?? ['files', 'memory', 'notes', 'projects']).map((s) => SOURCE_KINDS[s]).sort(),
      within,
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
    const chosen = await this.embedders.embedderOf(userId, await this.embedders.chosenModel(userId));
    if (chosen.kind === 'unavailable') return lexicalOnly(`Vector retrieval was skipped: ${chosen.reason}`);
    let vector: number[];
    try {
      [vector] = (
        chosen.kind === 'connection'
          ? await this.embedders.embedThrough(userId, chosen, [request.query], 'query')
          : await this.embedders.embed([request.query], 'query')
      ) as [number[]];
    } catch (error) {
      // Embeddings never fail a search: it answers from full-text retrieval and says why.
      const reason = error instanceof EmbeddingsFailure ? error.message : 'The embeddings failed.';
      return lexicalOnly(`Vector retrieval was skipped: ${reason}`);
    }
    // Only vectors of the same embedder (and size) are compared: the user's connection model's, or the deployment's.
    const model = chosen.kind === 'connection' ? chosen.embedder.name : this.embedders.deployment.name;
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
   * `within` narrows it further (a skill's knowledge scope), in the search's statements.
   */
  async passages(
    userId: string,
    query: string,
    options: { limit: number; sources?: Request['sources']; within?: repo.Within | null },
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
      options.within ?? null,
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
    const skip = new Set(this.embedders.waitingConnections());
    let deploymentFailure: unknown = null;
    let total = 0;
    for (let batch = 0; batch < maxBatches; batch += 1) {
      const pending = await repo.pendingSources(this.db, this.embedders.deployment.name, [...skip], INDEX_BATCH);
      if (pending.length === 0) break;
      const groups = new Map<string, repo.PendingSource[]>();
      for (const source of pending) groups.set(source.attempt, [...(groups.get(source.attempt) ?? []), source]);
      for (const [attempt, sources] of groups) {
        const { model, owner } = sources[0] as repo.PendingSource;
        const rows = (vectors: number[][]) => sources.map((p, i) => ({ ...p, vector: toVectorLiteral(vectors[i] as number[]) }));
        if (model === this.embedders.deployment.name) {
          try {
            const vectors = await this.embedders.embed(
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
        const chosen = await this.embedders.embedderOf(owner, model.slice('connection:'.length));
        if (chosen.kind !== 'connection' || chosen.embedder.name !== model) {
          // Changed since the batch was read (the connection deleted: the next pass sees the deployment's due), or unusable now.
          skip.add(attempt);
          if (chosen.kind === 'unavailable') {
            this.embedders.connectionFailed(attempt);
            this.log('info', "a user's embeddings model cannot be used; their records wait", {
              userId: owner,
              model,
              error: chosen.reason,
            });
          }
          continue;
        }
        try {
          await this.embedders.embedThrough(
            owner,
            chosen,
            sources.map((p) => p.text),
            'index',
            (trx, vectors) => repo.upsertEmbeddings(trx, model, rows(vectors)),
          );
          this.embedders.connectionRecovered(attempt);
          total += sources.length;
        } catch (error) {
          skip.add(attempt);
          this.embedders.connectionFailed(attempt);
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
