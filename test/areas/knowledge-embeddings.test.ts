import { sql } from 'kysely';
import { type IndexerTimers, KnowledgeIndexer } from '../../src/areas/knowledge/indexer';
import { anotherInstance, useHarnessWith } from '../helpers/harness';
import { type FakeModelServer, startFakeModel } from '../helpers/openai-server';

// An OpenAI-format embeddings server that returns 768 dimensions (as nomic-embed-text does) while
// the service asks for 256. The background indexer is left idle: the tests run passes themselves.
let server: FakeModelServer;
beforeAll(async () => {
  server = await startFakeModel();
  server.catalogue.embeddingDimensions = 768;
});
afterAll(() => server.close());
const ctx = useHarnessWith(
  () => ({
    EMBEDDINGS_PROVIDER: 'http',
    EMBEDDINGS_BASE_URL: server.baseUrl,
    EMBEDDINGS_MODEL: 'nomic-embed-text',
    EMBEDDINGS_DIMENSIONS: '256',
    // Long enough that a loaded machine never reaches it for an answer that comes; only the hanging
    // provider's test waits it out.
    EMBEDDINGS_QUERY_TIMEOUT_MS: '10000',
    KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
  }),
  'alice',
);
const vector = () => ctx.h.runtime.services.knowledge.vectorAvailable; // pgvector: the embedded PGlite only

const search = (query: string) => ctx.h.http().post('/api/v1/knowledge/search').set(ctx.alice.auth).send({ query });

beforeAll(async () => {
  await ctx.h
    .http()
    .post('/api/v1/notes')
    .set(ctx.alice.auth)
    .send({ title: 'Garden plan', content: 'Plant tomatoes and basil this spring.' })
    .expect(200);
  await ctx.h
    .http()
    .post('/api/v1/notes')
    .set(ctx.alice.auth)
    .send({ title: 'Review', content: 'Revenue grew in the third quarter.' })
    .expect(200);
});

describe('knowledge search when the embeddings fail', () => {
  test('vectors of another size: 200 from full-text retrieval, the sizes named; /readyz stays ready and says so', async () => {
    server.catalogue.embeddingDimensions = 768;
    const res = await search('tomatoes basil');
    expect(res.status).toBe(200);
    expect(res.body.retrieval).toBe('lexical');
    expect(res.body.results[0]).toMatchObject({ kind: 'note', title: 'Garden plan' });
    if (!vector()) {
      expect((await ctx.h.http().get('/readyz')).body.checks).toMatchObject({ database: true, embeddings: 'unused' });
      return;
    }
    expect(res.body.retrievalNote).toMatch(/returned vectors of 768 dimensions; expected 256 \(EMBEDDINGS_DIMENSIONS\)/);
    const ready = await ctx.h.http().get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.checks).toMatchObject({ database: true, embeddings: 'failing' });
  });

  test('a provider that is down: 200 from full-text retrieval, no address in the answer', async () => {
    server.catalogue.embeddingDimensions = null;
    const res = await search('revenue quarter');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ retrieval: 'lexical', results: [expect.objectContaining({ title: 'Review' })] });
    if (!vector()) return;
    expect(res.body.retrievalNote).toBe('Vector retrieval was skipped: The embeddings provider could not be reached.');
    expect(JSON.stringify(res.body)).not.toMatch(/127\.0\.0\.1/);
  });

  test('a provider that never answers: the search waits EMBEDDINGS_QUERY_TIMEOUT_MS, then answers from full-text retrieval', async () => {
    server.catalogue.embeddingDimensions = 'hang';
    const res = await search('revenue quarter');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ retrieval: 'lexical', results: [expect.objectContaining({ title: 'Review' })] });
    if (!vector()) return;
    expect(res.body.retrievalNote).toBe('Vector retrieval was skipped: The embeddings provider did not answer within 10000 ms.');
  });

  test('the indexer backs off exponentially up to its cap while embeddings fail, and resets on success', async () => {
    if (!vector()) return;
    server.catalogue.embeddingDimensions = 768;
    const pending: Array<{ run: () => void; ms: number }> = [];
    const timers: IndexerTimers = {
      setTimeout: (run, ms) => pending.push({ run, ms }),
      clearTimeout: () => undefined,
    };
    const errors: string[] = [];
    const indexer = new KnowledgeIndexer({
      knowledge: ctx.h.runtime.services.knowledge,
      intervalMs: 1000,
      onError: (error) => errors.push((error as Error).message),
      maxBackoffMs: 8000,
      timers,
    });
    /** Fires the one scheduled pass and waits until it has scheduled the next; returns the wait it had been given. */
    const fire = async () => {
      expect(pending).toHaveLength(1);
      const { run, ms } = pending.pop()!;
      const before = server.embeddingRequests;
      run();
      const deadline = Date.now() + 30_000;
      while (pending.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(server.embeddingRequests).toBeGreaterThan(before);
      return ms;
    };
    indexer.start();
    const waits = [];
    for (let i = 0; i < 6; i += 1) waits.push(await fire());
    expect(waits).toEqual([1000, 2000, 4000, 8000, 8000, 8000]);
    expect(indexer.status).toEqual({ consecutiveFailures: 6, nextDelayMs: 8000 });
    expect(errors.at(-1)).toMatch(/768 dimensions; expected 256/);

    server.catalogue.embeddingDimensions = 256;
    expect(await fire()).toBe(8000);
    expect(indexer.status).toEqual({ consecutiveFailures: 0, nextDelayMs: 1000 });
    expect(pending[0]!.ms).toBe(1000);
    await indexer.stop();

    // Indexed: searches are hybrid again, and /readyz reports the embeddings as ok.
    const hybrid = (await search('tomatoes basil')).body;
    expect(hybrid).toMatchObject({ retrieval: 'hybrid' });
    expect(hybrid.results[0]).toMatchObject({ title: 'Garden plan' });
    expect(hybrid.retrievalNote).toBeUndefined();
    expect((await ctx.h.http().get('/readyz')).body.checks.embeddings).toBe('ok');
  });

  test('a change of embeddings model re-embeds every record in the background; a size left unset is learned', async () => {
    if (!vector()) return;
    server.catalogue.embeddingDimensions = 256;
    await ctx.h.runtime.indexer.runOnce();
    const db = ctx.h.runtime.database.db;
    const models = async () =>
      (
        await sql<{
          model: string;
          dims: number;
        }>`select distinct embedding_model as model, vector_dims(embedding) as dims from knowledge_embeddings where owner_user_id = ${ctx.alice.userId}`.execute(
          db,
        )
      ).rows;
    expect(await models()).toEqual([{ model: 'http:nomic-embed-text#256', dims: 256 }]);

    // Another instance with the model's own size (768, learned from its first answer).
    server.catalogue.embeddingDimensions = 768;
    const other = await anotherInstance(ctx.h, {
      EMBEDDINGS_PROVIDER: 'http',
      EMBEDDINGS_BASE_URL: server.baseUrl,
      EMBEDDINGS_MODEL: 'nomic-embed-text',
      KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
    });
    try {
      expect(await other.services.knowledge.indexPending()).toBeGreaterThanOrEqual(2);
      expect(await models()).toEqual([{ model: 'http:nomic-embed-text', dims: 768 }]);
      const found = await other.services.knowledge.search(ctx.alice.userId, { query: 'tomatoes basil' });
      expect(found.retrieval).toBe('hybrid');
      expect(found.hits[0]?.hit.title).toBe('Garden plan');
    } finally {
      await other.close();
    }
  });
});
