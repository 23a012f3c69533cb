import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { LEXICAL_CANDIDATES, lexicalHits, type SourceKind, vectorHits } from '../../src/areas/knowledge/repository';
import { HashingEmbedder, toVectorLiteral } from '../../src/platform/ai/embeddings';
import { storeFile } from '../helpers/files';
import { useHarnessWith } from '../helpers/harness';

// Search whose cost is bounded by the page: a labelled set ranked with a small candidate bound, and
// vector retrieval among 100 users' rows. The background indexer is left idle: the tests run it.
const ctx = useHarnessWith(() => ({ KNOWLEDGE_INDEX_INTERVAL_MS: '3600000' }), 'alice', 'bob');
const ALL: SourceKind[] = ['file', 'memory', 'note', 'project'];
const filler = (n: number) => Array.from({ length: n }, () => 'lorem ipsum dolor amet').join(' ');

/** Each query with the passage that should come first: its kind and a text it contains. */
const LABELLED: Array<{ query: string; kind: SourceKind; text: string }> = [
  { query: 'sourdough starter feeding schedule', kind: 'note', text: 'Feed the sourdough starter every morning' },
  { query: 'overdue invoice payment reminder', kind: 'memory', text: 'Send the overdue invoice payment reminder' },
  { query: 'lisbon hotel booking alfama', kind: 'file', text: 'Hotel booking in Lisbon confirmed' },
  { query: 'quarterly revenue forecast spreadsheet', kind: 'file', text: 'The quarterly revenue forecast lives' },
  { query: 'coral reef bleaching survey', kind: 'project', text: 'Coral reef bleaching survey' },
  { query: 'garden tomato watering rota', kind: 'note', text: 'Garden tomato watering rota' },
];

/** Passages with two of a query's words and one of the next query's: many per tier, all newer than the answers. */
const distractor = (i: number) => {
  const words = (n: number) => (LABELLED[n % LABELLED.length] as { query: string }).query.split(' ');
  const [a, b] = [words(i), words(i + 1)];
  return `${a[i % 4]} and ${a[(i + 1) % 4]} again ${a[i % 4]}, then ${b[(i + 2) % 4]}. ${filler(3)}`;
};

const post = async (user: 'alice' | 'bob', path: string, body: Record<string, unknown>) => {
  const res = await ctx.h.http().post(path).set(ctx[user].auth).send(body);
  expect(res.status).toBe(200);
  return res.body;
};

async function ingest(user: 'alice' | 'bob', name: string, paragraphs: string[]): Promise<string> {
  // Paragraphs of about 800 characters: the chunker cuts one chunk per paragraph.
  const text = paragraphs.map((p) => `${p} ${filler(40)}`.slice(0, 800)).join('\n\n');
  const file = await storeFile(ctx.h, ctx[user], name, 'text/markdown', Buffer.from(text));
  await ctx.h.http().post('/api/v1/files/ingest-document').set(ctx[user].auth).send({ fileId: file.fileId }).expect(200);
  return file.fileId;
}

let distractorFile = '';
/** The id of each labelled answer (its file's for a chunk), by query. */
const answers = new Map<string, string>();
beforeAll(async () => {
  // The answers first (the oldest rows), then the distractors.
  const [starter, overdue, lisbon, revenue, reef, rota] = LABELLED.map((l) => l.text) as string[];
  answers.set(
    LABELLED[0]!.query,
    (await post('alice', '/api/v1/notes', { title: 'Starter', content: `${starter}; the feeding schedule is on the fridge.` })).note.noteId,
  );
  answers.set(
    LABELLED[1]!.query,
    (await post('alice', '/api/v1/memory', { kind: 'fact', content: `${overdue} on Fridays.` })).memoryItem.memoryId,
  );
  answers.set(LABELLED[2]!.query, await ingest('alice', 'trip.md', [filler(5), `${lisbon}, a room near Alfama.`, filler(5)]));
  answers.set(LABELLED[3]!.query, await ingest('alice', 'finance.md', [`${revenue} in the spreadsheet.`, filler(5)]));
  answers.set(
    LABELLED[4]!.query,
    (await post('alice', '/api/v1/projects', { name: 'Reef', description: `${reef} along the coast` })).project.projectId,
  );
  answers.set(
    LABELLED[5]!.query,
    (await post('alice', '/api/v1/notes', { title: 'Rota', content: `${rota}: water at dawn.` })).note.noteId,
  );
  for (let i = 0; i < 24; i += 1) {
    await post('alice', '/api/v1/notes', { title: `Distractor ${i}`, content: distractor(i) });
    await post('alice', '/api/v1/memory', { kind: 'fact', content: distractor(i + 7) });
  }
  distractorFile = await ingest(
    'alice',
    'distractors.md',
    Array.from({ length: 30 }, (_, i) => distractor(i + 3)),
  );
});

describe('lexical search ranks a bounded set of candidates', () => {
  test('the labelled answers come first with a bound far below the matches, and with the default', async () => {
    const db = ctx.h.runtime.database.db;
    const scope = { userId: ctx.alice.userId, kinds: ALL };
    for (const bound of [3, LEXICAL_CANDIDATES]) {
      for (const { query, kind, text } of LABELLED) {
        // A page of 3: the answer (all the words), then the best of the many two-word distractors.
        const hits = await lexicalHits(db, scope, query, 3, 'later', bound);
        expect({ query, bound, count: hits.length }).toEqual({ query, bound, count: 3 });
        expect({ query, bound, top: hits[0]?.kind, text: hits[0]?.snippet.includes(text) }).toEqual({
          query,
          bound,
          top: kind,
          text: true,
        });
      }
    }
    // Over HTTP, fused with vector ranks where the database has pgvector: among the first three.
    for (const { query } of LABELLED) {
      const res = await post('alice', '/api/v1/knowledge/search', { query, limit: 10 });
      const first = (res.results as Array<{ id: string }>).slice(0, 3).map((r) => r.id);
      expect({ query, found: first.includes(answers.get(query) as string) }).toEqual({ query, found: true });
    }
  });

  test('a tier with more matches than the bound is ranked among its newest only, the same every time', async () => {
    const db = ctx.h.runtime.database.db;
    const scope = { userId: ctx.alice.userId, kinds: ['file' as const] };
    // "hotel" is in the answer of trip.md and in many of the newer distractors' chunks.
    const { rows } = await sql<{ seq: number }>`
      select seq from file_chunks where file_id = ${distractorFile} and tsv @@ to_tsquery('english', 'hotel')
      order by seq desc limit 2`.execute(db);
    const hits = await lexicalHits(db, scope, 'hotel', 2, 'cut', 2);
    expect(hits.map((hit) => [hit.file_id, hit.seq]).sort()).toEqual(rows.map((row) => [distractorFile, row.seq]).sort());
    expect(await lexicalHits(db, scope, 'hotel', 2, 'cut', 2)).toEqual(hits);
    // With a larger bound the older answer is among the candidates, and ranks by its words as before.
    const wide = await lexicalHits(db, scope, 'hotel', 40, 'cut', 100);
    expect(wide.length).toBeGreaterThan(2);
    expect(wide.some((hit) => hit.snippet.includes('Lisbon'))).toBe(true);
  });
});

describe('vector search among 100 users', () => {
  test('the caller gets a full page of their own and shared rows, never another user’s', async () => {
    const knowledge = ctx.h.runtime.services.knowledge;
    if (!knowledge.vectorAvailable) {
      expect(await knowledge.indexPending()).toBe(0); // no pgvector: vector retrieval never runs
      return;
    }
    const db = ctx.h.runtime.database.db;
    const topic = 'harbour crane maintenance logbook';
    // 98 other users' notes say exactly the query (the nearest rows there are); the caller's and
    // the shared file's only contain it, so a filter after a plain nearest-k scan would find none.
    await sql`insert into notes (id, owner_user_id, title, content)
              select ${`other-${randomUUID()}-`} || g, 'other-user-' || (g % 98), 'Crane', ${topic} || ' ' || g
              from generate_series(1, 2940) g`.execute(db);
    const own = new Set<string>();
    for (let i = 0; i < 12; i += 1) {
      own.add((await post('alice', '/api/v1/notes', { title: `Mine ${i}`, content: `${topic} entry ${i}` })).note.noteId);
    }
    // One chunk, owned by bob, shared with the caller: its embedding is bob's row.
    const text = Array.from({ length: 4 }, (_, i) => `${topic} section ${i}`).join('\n\n');
    const sharedFile = (await storeFile(ctx.h, ctx.bob, 'cranes.md', 'text/markdown', Buffer.from(text))).fileId;
    await ctx.h.http().post('/api/v1/files/ingest-document').set(ctx.bob.auth).send({ fileId: sharedFile }).expect(200);
    await ctx.h
      .http()
      .patch('/api/v1/files/share')
      .set(ctx.bob.auth)
      .send({ fileId: sharedFile, add: [ctx.alice.userId] })
      .expect(200);
    while ((await knowledge.indexPending(16)) > 0);
    const embedder = new HashingEmbedder();
    const [vector] = await embedder.embed([topic]);
    const embedding = { model: embedder.name, vector: toVectorLiteral(vector as number[]), dimensions: 256 };
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from knowledge_embeddings`.execute(db);
    expect(rows[0]!.n).toBeGreaterThan(2940);

    const scope = { userId: ctx.alice.userId, kinds: ALL };
    // The 13 rows of the caller's with the query's words: their 12 notes and the shared chunk.
    const nearest = await vectorHits(db, scope, topic, embedding, 13);
    expect(nearest.map((hit) => (hit.kind === 'file' ? hit.file_id : hit.id)).sort()).toEqual([...own, sharedFile].sort());
    const page = await vectorHits(db, scope, topic, embedding, 10);
    expect(page).toHaveLength(10);
    expect(page.every((hit) => own.has(hit.id) || hit.file_id === sharedFile)).toBe(true);
    // Over HTTP: every result is the caller's or shared with them.
    const res = await post('alice', '/api/v1/knowledge/search', { query: topic, limit: 20 });
    expect(res.retrieval).toBe('hybrid');
    for (const r of res.results as Array<{ kind: string; id: string; fileId: string | null }>) {
      expect(r.id.startsWith('other-')).toBe(false);
    }
    expect((res.results as Array<{ fileId: string | null }>).some((r) => r.fileId === sharedFile)).toBe(true);
    // The other users are not shown the caller's rows either.
    const theirs = await vectorHits(db, { userId: 'other-user-5', kinds: ALL }, topic, embedding, 40);
    expect(theirs).toHaveLength(30);
    expect(theirs.every((hit) => hit.kind === 'note' && !own.has(hit.id))).toBe(true);
  });
});
