import { sql } from 'kysely';
import { type Harness, startHarness, type TestUser, userNamed } from '../helpers/harness';
import { type FakeModelServer, startFakeModel } from '../helpers/openai-server';

// A user's knowledge embedded through their own connection's embeddings model: a local server in
// OpenAI's format serves /v1/embeddings with the user's key. The deployment keeps its built-in
// hashing embedder for everyone else. The background indexer is left idle: tests run passes.
const ALICE_KEY = 'sk-ALICE-EMBEDDINGS-SECRET-7a3c9e1f5b2d8046';
const NEW_KEY = 'sk-ALICE-ROTATED-SECRET-2e8b4d6f0a1c3957';
const ROOT = 'root-admin';

let server: FakeModelServer;
let h: Harness;
let alice: TestUser;
let bob: TestUser;
let admin: TestUser;
let connectionId: string;
let anthropicId: string;
let model: string;

beforeAll(async () => {
  server = await startFakeModel();
  server.catalogue.models = ['text-embedding-3-small', 'gpt-4o-mini'];
  server.catalogue.requiredKey = ALICE_KEY;
  server.catalogue.embeddingDimensions = 64;
  h = await startHarness({
    OUTBOUND_ALLOW_LOOPBACK: 'true',
    BOOTSTRAP_ADMIN_USER_IDS: ROOT,
    CAPABILITY_CACHE_MS: '0',
    KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
  });
  alice = await h.newUser('alice');
  bob = await h.newUser('bob');
  admin = await userNamed(h, ROOT);
  const created = await h
    .http()
    .post('/api/v1/model-providers')
    .set(alice.auth)
    .send({ kind: 'openai', name: 'My OpenAI', baseUrl: server.baseUrl, apiKey: ALICE_KEY });
  expect(created.status).toBe(200);
  connectionId = created.body.connection.connectionId;
  expect((await h.http().post('/api/v1/model-providers/test').set(alice.auth).send({ connectionId })).body.result.ok).toBe(true);
  model = `${connectionId}/text-embedding-3-small`;
  const anthropic = await h
    .http()
    .post('/api/v1/model-providers')
    .set(alice.auth)
    .send({ kind: 'anthropic', name: 'Claude', apiKey: 'sk-ant-x', enabledModels: ['claude-sonnet-4-5', 'voyage-embed-3'] });
  anthropicId = anthropic.body.connection.connectionId;
  for (const [user, title, content] of [
    [alice, 'Garden plan', 'Plant tomatoes and basil this spring.'],
    [alice, 'Review', 'Revenue grew in the third quarter.'],
    [bob, 'Bob garden', 'Tomatoes need sun and water.'],
  ] as const) {
    await h.http().post('/api/v1/notes').set(user.auth).send({ title, content }).expect(200);
  }
});

afterAll(async () => {
  await h?.close();
  await server?.close();
});

const vector = () => h.runtime.services.knowledge.vectorAvailable; // pgvector: the embedded PGlite only
const db = () => h.runtime.database.db;
const index = () => h.runtime.services.knowledge.indexPending();
const search = (user: TestUser, query: string) => h.http().post('/api/v1/knowledge/search').set(user.auth).send({ query });
const setModel = (user: TestUser, value: string | null) =>
  h.http().patch('/api/v1/settings').set(user.auth).send({ defaultEmbeddingsModel: value });
const embeddingsOf = async (owner: string) =>
  (
    await sql<{
      model: string;
      n: number;
    }>`select embedding_model as model, count(*)::int as n from knowledge_embeddings where owner_user_id = ${owner} group by 1 order by 1`.execute(
      db(),
    )
  ).rows;
const connection = async () => (await h.http().get('/api/v1/model-providers').query({ connectionId }).set(alice.auth)).body.connection;

describe('choosing an embeddings model of one of your connections', () => {
  test('GET /models lists the connection model of kind embeddings; the setting starts null (the deployment embedder)', async () => {
    const models = (await h.http().get('/api/v1/models').set(alice.auth)).body.models as Array<{ modelId: string; kinds: string[] }>;
    expect(models.find((m) => m.modelId === model)).toMatchObject({ kinds: ['embeddings'], connectionId });
    expect(models.find((m) => m.modelId === `${anthropicId}/voyage-embed-3`)?.kinds).not.toContain('embeddings');
    const settings = (await h.http().get('/api/v1/settings').set(alice.auth).expect(200)).body.settings;
    expect(settings.defaultEmbeddingsModel).toBeNull();
    expect(settings.inherited).toContain('defaultEmbeddingsModel');
  });

  test.each([
    ['a chat model', () => `${connectionId}/gpt-4o-mini`],
    ['an unknown model', () => `${connectionId}/text-embedding-9`],
    ['a model id without a connection', () => 'text-embedding-3-small'],
    ["an Anthropic connection's model (Anthropic has no embeddings)", () => `${anthropicId}/voyage-embed-3`],
  ])('%s is 400 and changes nothing', async (_name, value) => {
    const res = await setModel(alice, value());
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([expect.objectContaining({ path: '/body/defaultEmbeddingsModel' })]);
    expect((await h.http().get('/api/v1/settings').set(alice.auth)).body.settings.defaultEmbeddingsModel).toBeNull();
  });

  test("another user's connection model is 400 (it is not theirs to use)", async () => {
    const res = await setModel(bob, model);
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([expect.objectContaining({ path: '/body/defaultEmbeddingsModel' })]);
  });

  test('a wrong type is 400', async () => {
    expect((await h.http().patch('/api/v1/settings').set(alice.auth).send({ defaultEmbeddingsModel: 42 })).status).toBe(400);
  });

  test('alice chooses it: the setting and defaultFor say so', async () => {
    const res = await setModel(alice, model);
    expect(res.status).toBe(200);
    expect(res.body.settings.defaultEmbeddingsModel).toBe(model);
    expect(res.body.settings.inherited).not.toContain('defaultEmbeddingsModel');
    const models = (await h.http().get('/api/v1/models').set(alice.auth)).body.models as Array<{ modelId: string; defaultFor: string[] }>;
    expect(models.find((m) => m.modelId === model)?.defaultFor).toEqual(['embeddings']);
  });
});

describe("indexing and search through the user's connection", () => {
  test("alice's records are embedded through her connection with her key; bob's by the deployment's embedder", async () => {
    await index();
    if (!vector()) {
      expect(server.embeddings).toEqual([]);
      return;
    }
    expect(server.embeddings.length).toBeGreaterThan(0);
    for (const request of server.embeddings)
      expect(request).toMatchObject({ model: 'text-embedding-3-small', authorization: `Bearer ${ALICE_KEY}` });
    const sent = server.embeddings.flatMap((r) => r.input).join('\n');
    expect(sent).toContain('tomatoes and basil');
    expect(sent).not.toContain('Tomatoes need sun');
    expect(await embeddingsOf(alice.userId)).toEqual([{ model: `connection:${model}`, n: expect.any(Number) }]);
    expect(await embeddingsOf(bob.userId)).toEqual([{ model: 'builtin-hashing#256', n: expect.any(Number) }]);
  });

  test('alice searches: hybrid results, the query embedded through her connection', async () => {
    const before = server.embeddings.length;
    const res = await search(alice, 'tomatoes basil');
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ kind: 'note', title: 'Garden plan' });
    if (!vector()) {
      expect(res.body.retrieval).toBe('lexical');
      return;
    }
    expect(res.body.retrieval).toBe('hybrid');
    expect(server.embeddings.slice(before)).toEqual([
      { model: 'text-embedding-3-small', input: ['tomatoes basil'], authorization: `Bearer ${ALICE_KEY}` },
    ]);
  });

  test('bob keeps the deployment embedder and never reaches the server', async () => {
    const before = server.embeddingRequests;
    const res = await search(bob, 'tomatoes sun');
    expect(res.status).toBe(200);
    expect(res.body.retrieval).toBe(vector() ? 'hybrid' : 'lexical');
    expect(res.body.results[0]).toMatchObject({ title: 'Bob garden' });
    expect(server.embeddingRequests).toBe(before);
  });

  test('usage is recorded with the connection at cost 0, and nothing is charged', async () => {
    if (!vector()) return;
    const usage = await sql<{ kind: string; model: string; connection_id: string | null; cost: number; input_tokens: number }>`
      select kind, model, connection_id, cost_micro_cents::int as cost, input_tokens from usage_records where user_id = ${alice.userId} order by id`.execute(
      db(),
    );
    expect(usage.rows.map((r) => r.kind)).toEqual(expect.arrayContaining(['knowledge.index', 'knowledge.search']));
    for (const row of usage.rows) expect(row).toMatchObject({ model, connection_id: connectionId, cost: 0 });
    expect(usage.rows.find((r) => r.kind === 'knowledge.search')?.input_tokens).toBe(2);
    const charged = await sql<{
      n: number;
    }>`select (select count(*)::int from ledger_entries where user_id = ${alice.userId}) + (select count(*)::int from budgets where user_id = ${alice.userId}) as n`.execute(
      db(),
    );
    expect(charged.rows[0]!.n).toBe(0);
    const bobUsage = await sql<{ n: number }>`select count(*)::int as n from usage_records where user_id = ${bob.userId}`.execute(db());
    expect(bobUsage.rows[0]!.n).toBe(0);
  });
});

describe('when the connection fails', () => {
  afterEach(() => {
    server.catalogue.requiredKey = ALICE_KEY;
    server.catalogue.embeddingDimensions = 64;
  });

  test('a refused key: search answers lexically with the reason, no key in it; the connection shows the error', async () => {
    server.catalogue.requiredKey = NEW_KEY;
    const res = await search(alice, 'revenue quarter');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ retrieval: 'lexical', results: [expect.objectContaining({ title: 'Review' })] });
    if (!vector()) return;
    expect(res.body.retrievalNote).toMatch(/^Vector retrieval was skipped: .*401/);
    expect(JSON.stringify(res.body)).not.toContain(ALICE_KEY);
    const row = await connection();
    expect(row.status).toBe('error');
    expect(row.lastError).toMatch(/401/);
    expect(row.lastError).not.toContain(ALICE_KEY);
  });

  test("the indexer leaves alice's records waiting without holding up bob's; a new key is tried at once", async () => {
    if (!vector()) return;
    server.catalogue.requiredKey = NEW_KEY;
    const note = await h
      .http()
      .post('/api/v1/notes')
      .set(alice.auth)
      .send({ title: 'Travel', content: 'Book the train to Lyon.' })
      .expect(200);
    const bobs = await h.http().post('/api/v1/notes').set(bob.auth).send({ title: 'Bob travel', content: 'Bike to the lake.' }).expect(200);
    await expect(index()).resolves.toBe(1);
    const embedded = async (id: string) =>
      (await sql<{ n: number }>`select count(*)::int as n from knowledge_embeddings where source_id = ${id}`.execute(db())).rows[0]!.n;
    expect(await embedded(bobs.body.note.noteId)).toBe(1);
    expect(await embedded(note.body.note.noteId)).toBe(0);
    // Backing off: the next pass does not call the failing connection again.
    const calls = server.embeddingRequests;
    await expect(index()).resolves.toBe(0);
    expect(server.embeddingRequests).toBe(calls);
    // The user fixes the key: the changed connection is tried on the next pass.
    await h.http().patch('/api/v1/model-providers').set(alice.auth).send({ connectionId, apiKey: NEW_KEY }).expect(200);
    await expect(index()).resolves.toBe(1);
    expect(await embedded(note.body.note.noteId)).toBe(1);
    expect(server.embeddings.at(-1)?.authorization).toBe(`Bearer ${NEW_KEY}`);
    await h.http().patch('/api/v1/model-providers').set(alice.auth).send({ connectionId, apiKey: ALICE_KEY }).expect(200);
  });

  test('a server that is down: lexical, 200, no address', async () => {
    server.catalogue.embeddingDimensions = null;
    const res = await search(alice, 'revenue quarter');
    expect(res.status).toBe(200);
    expect(res.body.retrieval).toBe('lexical');
    if (!vector()) return;
    expect(res.body.retrievalNote).toMatch(/^Vector retrieval was skipped: /);
    expect(JSON.stringify(res.body)).not.toMatch(/127\.0\.0\.1/);
  });

  test('a model the admin policy blocks: lexical with the reason; the search works again once unblocked', async () => {
    await h
      .http()
      .patch('/api/v1/admin/model-policy')
      .set(admin.auth)
      .send({ block: ['text-embedding-3-small'] })
      .expect(200);
    const res = await search(alice, 'revenue quarter');
    expect(res.status).toBe(200);
    expect(res.body.retrieval).toBe('lexical');
    if (vector()) expect(res.body.retrievalNote).toMatch(/model policy blocks/);
    await h.http().patch('/api/v1/admin/model-policy').set(admin.auth).send({ block: [] }).expect(200);
    expect((await search(alice, 'revenue quarter')).body.retrieval).toBe(vector() ? 'hybrid' : 'lexical');
  });
});

describe('back to the deployment embedder', () => {
  test("deleting the connection re-embeds alice's records with the deployment's embedder, without the server", async () => {
    await h.http().delete('/api/v1/model-providers').query({ connectionId }).set(alice.auth).expect(200);
    const before = server.embeddingRequests;
    await index();
    const res = await search(alice, 'tomatoes basil');
    expect(res.status).toBe(200);
    expect(res.body.retrieval).toBe(vector() ? 'hybrid' : 'lexical');
    expect(server.embeddingRequests).toBe(before);
    if (vector()) expect(await embeddingsOf(alice.userId)).toEqual([{ model: 'builtin-hashing#256', n: expect.any(Number) }]);
  });

  test('clearing the setting is accepted (null: the deployment embedder)', async () => {
    const res = await setModel(alice, null);
    expect(res.status).toBe(200);
    expect(res.body.settings).toMatchObject({ defaultEmbeddingsModel: null });
    expect(res.body.settings.inherited).toContain('defaultEmbeddingsModel');
  });
});
