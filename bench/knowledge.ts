/**
 * Knowledge search at 100,000 chunks (part of `make bench`): p50/p95 of lexical and hybrid search
 * through the service's KnowledgeService, next to the raw SQL of each retrieval, in one run, on
 * the embedded PGlite (which has pgvector). Prints rows for the table of bench/run.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { AuditService } from '../src/areas/audit/service';
import { CapabilityService } from '../src/areas/capabilities/service';
import { KnowledgeService } from '../src/areas/knowledge/service';
import { ProjectService } from '../src/areas/projects/service';
import { HashingEmbedder, toVectorLiteral } from '../src/platform/ai/embeddings';
import { openPglite } from '../src/platform/db';
import { anyWord } from '../src/platform/db/text-search';
import { migrateToLatest } from '../src/platform/db/migrate';
import { percentile } from './process';

const CHUNKS = Number(process.env.BENCH_CHUNKS ?? 100_000);
const QUERIES = 40;
const USER = 'bench-user';

/**
 * A deterministic pseudo-random word stream (mulberry32, not Math.random: the same corpus every
 * run): mostly 2,000 made-up words, with topic words (the ones queried) one time in twenty, each
 * topic equally likely, so a queried word occurs in about 6% of the chunks (thousands) and two
 * of them together in a few hundred. (A linear congruential generator used before made some
 * topics co-occur never and one occur in most chunks.)
 */
function* words(seed: number): Generator<string> {
  const syllables = [
    'ka',
    'lo',
    'mi',
    'ne',
    'ru',
    'sa',
    'ti',
    'vo',
    'ze',
    'pa',
    'qu',
    'bri',
    'dra',
    'fen',
    'gor',
    'hal',
    'jun',
    'wex',
    'yor',
    'tal',
  ];
  const madeUp = Array.from(
    { length: 2000 },
    (_, i) => `${syllables[i % 20]}${syllables[Math.floor(i / 20) % 20]}${syllables[Math.floor(i / 400) % 20]}`,
  );
  const topics =
    'revenue quarter plan garden tomato basil coral reef thesis research travel lisbon hotel river budget cost forecast meeting notes design review deploy server database index search vector memory project skill agent model prompt token invoice contract policy privacy security audit export report chart image audio video draft summary'.split(
      ' ',
    );
  let state = seed >>> 0;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  for (;;) {
    const pick = random();
    yield pick < 0.05 ? (topics[Math.floor(random() * topics.length)] as string) : (madeUp[Math.floor(random() * madeUp.length)] as string);
  }
}

/** p50 and p95 of QUERIES runs, after a warm-up pass over each distinct query (discarded, as wrk's is). */
async function timed(run: (i: number) => Promise<unknown>, distinct: number): Promise<{ p50: number; p95: number }> {
  for (let i = 0; i < distinct; i += 1) await run(i);
  const times: number[] = [];
  for (let i = 1; i <= QUERIES; i += 1) {
    const started = performance.now();
    await run(i);
    times.push(performance.now() - started);
  }
  return { p50: percentile(times, 50), p95: percentile(times, 95) };
}

export async function knowledgeBench(log: (line: string) => void = () => undefined): Promise<Array<[string, string]>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-bench-knowledge-'));
  const database = await openPglite(path.join(dir, 'pglite'));
  try {
    const db = database.db;
    await migrateToLatest(db);
    await sql`insert into files (id, owner_user_id, kind, name, mime_type, size_bytes, status, chunk_generation, ingest_status, chunk_count)
              values ('bench-file', ${USER}, 'file', 'corpus.txt', 'text/plain', 0, 'ready', 1, 'ready', ${CHUNKS})`.execute(db);
    const embedder = new HashingEmbedder();
    const stream = words(42);
    const started = performance.now();
    await sql`drop index knowledge_embeddings_hnsw_256_idx`.execute(db);
    for (let offset = 0; offset < CHUNKS; offset += 500) {
      const batch = Array.from({ length: Math.min(500, CHUNKS - offset) }, (_, i) => ({
        seq: offset + i,
        content: Array.from({ length: 60 }, () => stream.next().value as string).join(' '),
      }));
      await sql`insert into file_chunks (file_id, generation, seq, start_offset, end_offset, content) values ${sql.join(
        batch.map((c) => sql`('bench-file', 1, ${c.seq}, ${c.seq * 400}, ${c.seq * 400 + c.content.length}, ${c.content})`),
      )}`.execute(db);
      const vectors = await embedder.embed(batch.map((c) => c.content));
      await sql`insert into knowledge_embeddings (source_kind, source_id, owner_user_id, source_version, embedding, embedding_model) values ${sql.join(
        batch.map(
          (c, i) =>
            sql`('file', ${`bench-file:1:${c.seq}`}, ${USER}, 'chunk', ${toVectorLiteral(vectors[i] as number[])}::vector, ${embedder.name})`,
        ),
      )}`.execute(db);
    }
    log(`loaded ${CHUNKS} chunks and embeddings in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const indexStarted = performance.now();
    // Built once over the loaded rows (as a restore would), with the memory to hold its graph.
    await sql`set maintenance_work_mem = '1GB'`.execute(db);
    await sql`create index knowledge_embeddings_hnsw_256_idx on knowledge_embeddings
              using hnsw ((embedding::vector(256)) vector_cosine_ops) where vector_dims(embedding) = 256`.execute(db);
    await sql`analyze`.execute(db);
    log(`built the HNSW index in ${((performance.now() - indexStarted) / 1000).toFixed(1)} s`);

    const audit = new AuditService(db);
    const defaults = {
      automations: true,
      billing: false,
      vectorSearch: true,
      byok: true,
      mcp: true,
      integrations: true,
      openaiApi: true,
      mcpServer: true,
      billingProvider: 'stripe' as const,
      cacheMs: 0,
    };
    const capabilities = new CapabilityService({ db, audit, defaults, vectorAvailable: true });
    const knowledge = new KnowledgeService({ db, capabilities, projects: new ProjectService(db), embedder, vectorAvailable: true });
    const queries = [
      'quarterly revenue forecast',
      'coral reef research',
      'hotel in lisbon',
      'security audit export',
      'vector index search',
      'garden tomato basil',
    ];
    const query = (i: number) => queries[i % queries.length] as string;
    const actor = { userId: 'bench-admin', requestId: null };

    await capabilities.update(actor, { vectorSearch: false });
    const lexical = await timed((i) => knowledge.search(USER, { query: query(i), limit: 10 }), queries.length);
    const rawLexical = await timed(
      (i) =>
        sql`select c.seq from file_chunks c, (select ${anyWord(query(i))} as q) query
          where c.tsv @@ query.q order by ts_rank_cd(c.tsv, query.q) desc limit 10`.execute(db),
      queries.length,
    );
    await capabilities.update(actor, { vectorSearch: true });
    const hybrid = await timed((i) => knowledge.search(USER, { query: query(i), limit: 10 }), queries.length);
    const vectors = await embedder.embed(queries);
    const rawVector = await timed(
      (i) =>
        sql`select source_id from knowledge_embeddings where vector_dims(embedding) = 256
          order by embedding::vector(256) <=> ${toVectorLiteral(vectors[i % queries.length] as number[])}::vector(256) limit 10`.execute(
          db,
        ),
      queries.length,
    );
    const ms = (v: number) => v.toFixed(1);
    return [
      [`knowledge search, ${CHUNKS} chunks, lexical: p50 / p95 (ms)`, `${ms(lexical.p50)} / ${ms(lexical.p95)}`],
      ['  raw full-text SQL (any word, rank, top 10): p50 / p95 (ms)', `${ms(rawLexical.p50)} / ${ms(rawLexical.p95)}`],
      [`knowledge search, ${CHUNKS} chunks, hybrid: p50 / p95 (ms)`, `${ms(hybrid.p50)} / ${ms(hybrid.p95)}`],
      ['  raw vector SQL (HNSW, top 10): p50 / p95 (ms)', `${ms(rawVector.p50)} / ${ms(rawVector.p95)}`],
    ];
  } finally {
    await database.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  knowledgeBench((line) => console.error(line)).then((rows) => {
    for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  });
}
