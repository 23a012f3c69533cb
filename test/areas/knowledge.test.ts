import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { lexicalHits, tiersOf } from '../../src/areas/knowledge/repository';
import { storeFile } from '../helpers/files';
import { useHarnessWith } from '../helpers/harness';

// The background indexer is left idle here: the tests run its passes themselves.
const ctx = useHarnessWith(() => ({ KNOWLEDGE_INDEX_INTERVAL_MS: '3600000' }), 'alice', 'bob');
const ids: Record<string, string> = {};

type Result = {
  kind: string;
  id: string;
  title: string;
  snippet: string;
  highlights: Array<{ start: number; end: number }>;
  fileId: string | null;
};
const search = async (user: 'alice' | 'bob', body: Record<string, unknown>) => {
  const res = await ctx.h.http().post('/api/v1/knowledge/search').set(ctx[user].auth).send(body);
  expect(res.status).toBe(200);
  return res.body as { results: Result[]; retrieval: string };
};

beforeAll(async () => {
  const { alice, bob } = ctx;
  const post = async (user: typeof alice, path: string, body: Record<string, unknown>) =>
    (await ctx.h.http().post(path).set(user.auth).send(body)).body;
  ids.garden = (
    await post(alice, '/api/v1/notes', { title: 'Garden plan', content: 'Plant tomatoes and basil in the raised bed this spring.' })
  ).note.noteId;
  ids.review = (
    await post(alice, '/api/v1/notes', {
      title: 'Quarterly review',
      content: 'Revenue grew twelve percent in the third quarter; costs were flat.',
    })
  ).note.noteId;
  ids.allergy = (await post(alice, '/api/v1/memory', { kind: 'fact', content: 'Allergic to peanuts and shellfish.' })).memoryItem.memoryId;
  ids.thesis = (
    await post(alice, '/api/v1/projects', {
      name: 'Thesis',
      description: 'Research on coral reef bleaching',
      instructions: 'Cite peer reviewed sources.',
    })
  ).project.projectId;
  const travel = await storeFile(
    ctx.h,
    alice,
    'travel.md',
    'text/markdown',
    Buffer.from('# Lisbon trip\n\nFlights booked for October. Hotel near the Alfama district, close to the river.'),
  );
  ids.travel = travel.fileId;
  await ctx.h.http().post('/api/v1/files/ingest-document').set(alice.auth).send({ fileId: travel.fileId }).expect(200);
  ids.bobsNote = (
    await post(bob, '/api/v1/notes', {
      title: 'Tomatoes',
      content: 'Bob grows tomatoes, basil and peanuts near the coral-pink Alfama hotel.',
    })
  ).note.noteId;
  await ctx.h.runtime.indexer.runOnce();
});

const expected = () => ({
  hybridOrLexical: ctx.h.runtime.services.knowledge.vectorAvailable ? 'hybrid' : 'lexical',
});

describe('knowledge search', () => {
  test('finds the expected top result in every kind of source', async () => {
    const cases: Array<[string, string, string]> = [
      ['tomatoes basil', 'note', ids.garden as string],
      ['revenue in the third quarter', 'note', ids.review as string],
      ['peanuts', 'memory', ids.allergy as string],
      ['coral reef bleaching', 'project', ids.thesis as string],
      ['hotel Alfama', 'file', ids.travel as string],
    ];
    for (const [query, kind, id] of cases) {
      const { results, retrieval } = await search('alice', { query });
      expect(retrieval).toBe(expected().hybridOrLexical);
      expect({ query, top: results[0] && { kind: results[0].kind, id: results[0].id } }).toEqual({ query, top: { kind, id } });
    }
    const file = (await search('alice', { query: 'Alfama', sources: ['files'] })).results[0];
    expect(file).toMatchObject({ kind: 'file', fileId: ids.travel, title: 'travel.md', chunkIndex: 0 });
    expect(file!.snippet).toContain('«Alfama»');
  });

  test('another user’s content never appears, even with the same words', async () => {
    const aliceIds = new Set(
      Object.entries(ids)
        .filter(([k]) => k !== 'bobsNote')
        .map(([, v]) => v),
    );
    for (const query of ['tomatoes', 'peanuts', 'Alfama hotel', 'coral', 'basil tomatoes peanuts']) {
      const { results } = await search('alice', { query, limit: 50 });
      for (const r of results) expect(aliceIds.has(r.id)).toBe(true);
      const bobs = await search('bob', { query, limit: 50 });
      for (const r of bobs.results) expect(r.id).toBe(ids.bobsNote);
    }
  });

  test('passages with more of the words come first, however often fewer words repeat', async () => {
    const word = `zq${randomUUID().slice(0, 6)}`;
    const dense = (
      await ctx.h
        .http()
        .post('/api/v1/notes')
        .set(ctx.alice.auth)
        .send({ title: 'Dense', content: `${word}alpha ${word}alpha ${word}alpha ${word}beta ${word}beta` })
    ).body.note.noteId;
    const all = (
      await ctx.h
        .http()
        .post('/api/v1/notes')
        .set(ctx.alice.auth)
        .send({
          title: 'All three',
          content: `${word}alpha and then, much later in a long sentence about other things, ${word}beta and ${word}gamma`,
        })
    ).body.note.noteId;
    const one = (
      await ctx.h
        .http()
        .post('/api/v1/notes')
        .set(ctx.alice.auth)
        .send({ title: 'One', content: `${word}gamma ${word}gamma ${word}gamma` })
    ).body.note.noteId;
    // Lexical retrieval itself (with vectorSearch on, the API fuses it with the vector ranks).
    const lexical = (limit: number) =>
      lexicalHits(ctx.h.runtime.database.db, { userId: ctx.alice.userId, kinds: ['note'] }, `${word}alpha ${word}beta ${word}gamma`, limit);
    const hits = await lexical(10);
    expect(hits.map((hit) => hit.id)).toEqual([all, dense, one]);
    const scores = hits.map((hit) => hit.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    // A limit the first tiers fill is answered from them alone.
    expect((await lexical(2)).map((hit) => hit.id)).toEqual([all, dense]);
  });

  test('tiers: every count of words from all to any, skipping only those with too many combinations', () => {
    expect(tiersOf(['a', 'b', 'c'])).toEqual([
      { words: 3, tsquery: "('a' & 'b' & 'c')" },
      { words: 2, tsquery: "('a' & 'b') | ('a' & 'c') | ('b' & 'c')" },
      { words: 1, tsquery: "('a') | ('b') | ('c')" },
    ]);
    expect(tiersOf(["it's"])).toEqual([{ words: 1, tsquery: "('it''s')" }]);
    const many = tiersOf(Array.from({ length: 9 }, (_, i) => `w${i}`)).map((tier) => tier.words);
    expect(many).toEqual([9, 8, 7, 2, 1]); // C(9,k) is 84 or 126 for k = 3..6
  });

  test('the same data and query give the same order, every time', async () => {
    const body = { query: 'the plan for tomatoes revenue peanuts reef hotel', limit: 20 };
    const first = await search('alice', body);
    for (let i = 0; i < 3; i += 1) expect(await search('alice', body)).toEqual(first);
    const lexical = await ctx.h.runtime.services.knowledge.search(ctx.alice.userId, { ...body, sources: ['notes', 'memory'] });
    expect(lexical.hits.length).toBeGreaterThan(0);
  });

  test('sources and projectId narrow the search; another user’s project is a 404', async () => {
    const { alice, bob } = ctx;
    const onlyMemory = await search('alice', { query: 'peanuts tomatoes', sources: ['memory'] });
    expect(onlyMemory.results.map((r) => r.kind)).toEqual(['memory']);
    const inThesis = await search('alice', { query: 'coral', projectId: ids.thesis });
    expect(inThesis.results.map((r) => r.id)).toEqual([ids.thesis]);
    const bobsProject = (await ctx.h.http().post('/api/v1/projects').set(bob.auth).send({ name: 'Bob stuff' })).body.project.projectId;
    expect((await ctx.h.http().post('/api/v1/knowledge/search').set(alice.auth).send({ query: 'x', projectId: bobsProject })).status).toBe(
      404,
    );
  });

  test('switching vectorSearch off answers lexically at once, with no error', async () => {
    const capabilities = ctx.h.runtime.services.capabilities;
    const admin = { userId: `admin-${randomUUID()}`, requestId: null };
    await capabilities.update(admin, { vectorSearch: false });
    try {
      const off = await search('alice', { query: 'tomatoes basil' });
      expect(off.retrieval).toBe('lexical');
      expect(off.results[0]!.id).toBe(ids.garden);
      expect((await ctx.h.http().get('/api/v1/capabilities').set(ctx.alice.auth)).body.capabilities.vectorSearch).toBe(false);
    } finally {
      await capabilities.update(admin, { vectorSearch: true });
    }
    expect((await search('alice', { query: 'tomatoes basil' })).retrieval).toBe(expected().hybridOrLexical);
  });

  test('embeddings follow writes in the background and survive a restart', async () => {
    const knowledge = ctx.h.runtime.services.knowledge;
    if (!knowledge.vectorAvailable) {
      expect(await knowledge.indexPending()).toBe(0);
      return;
    }
    const db = ctx.h.runtime.database.db;
    const count = async (id: string) =>
      (await sql<{ n: number }>`select count(*)::int as n from knowledge_embeddings where source_id = ${id}`.execute(db)).rows[0]!.n;
    const note = (
      await ctx.h.http().post('/api/v1/notes').set(ctx.alice.auth).send({ title: 'Fresh', content: 'Sourdough starter feeding schedule' })
    ).body.note;
    expect(await count(note.noteId)).toBe(0); // not computed in the request
    const meanwhile = await search('alice', { query: 'sourdough' });
    expect(meanwhile.results.map((r) => r.id)).toContain(note.noteId); // found by its words meanwhile
    expect(await knowledge.indexPending()).toBeGreaterThanOrEqual(1); // what a restarted instance's indexer does
    expect(await count(note.noteId)).toBe(1);
    expect(await knowledge.indexPending()).toBe(0);
    await ctx.h.http().patch('/api/v1/notes').set(ctx.alice.auth).send({ noteId: note.noteId, content: 'Rye starter' }).expect(200);
    expect(await knowledge.indexPending()).toBe(1);
    await ctx.h.http().delete('/api/v1/notes').query({ noteId: note.noteId }).set(ctx.alice.auth).expect(200);
    expect(await knowledge.deleteOrphans()).toBeGreaterThanOrEqual(1);
    expect(await count(note.noteId)).toBe(0);
  });

  test('bad input is a 400; no credentials a 401', async () => {
    for (const body of [
      {},
      { query: '' },
      { query: '  ' },
      { query: 'x', limit: 51 },
      { query: 'x', sources: ['email'] },
      { query: 'x', sources: [] },
      { query: 'x', extra: 1 },
      { query: 'x'.repeat(501) },
    ]) {
      expect((await ctx.h.http().post('/api/v1/knowledge/search').set(ctx.alice.auth).send(body)).status).toBe(400);
    }
    expect((await ctx.h.http().post('/api/v1/knowledge/search').send({ query: 'x' })).status).toBe(401);
    // A query of only stop words or symbols is not an error: no results.
    expect((await search('alice', { query: 'the of and' })).results.filter((r) => r.kind !== 'file')).toEqual(expect.any(Array));
  });
});
