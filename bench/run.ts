/**
 * `make bench`: the figures of #12 measured in one run, printed as one table with the Node
 * version. Servers run on one core and wrk (or the bench's own clients) on the other.
 *   - start-up to the first 200 of /readyz (PGlite: first start and restart; Postgres: a fresh
 *     database, then a restart) and idle RSS two seconds after;
 *   - B1 (Postgres, part `lists`): every list route of bench/lists.ts, GET ?limit=20 from tables
 *     of 100,000 rows, against the plain peer (Express 5, express-openapi-validator on the whole
 *     document, jose on every request, Kysely: bench/peer.ts) and the node:http limit
 *     (bench/baseline.ts), in BENCH_ROUNDS alternating rounds (default 5: the median per route; bench/pages.ts);
 *   - B2-B3 (Postgres, part `throughput`): an authenticated constant route against bare Express
 *     (in BENCH_ROUNDS interleaved rounds), the validated create;
 *   - load (Postgres): a list page at 8, 64, 256 and 1024 connections, with load shedding on and
 *     off and a larger young generation, against the limit (bench/load.ts);
 *   - B4: a 256 MiB upload and download against the raw stores and bare HTTP, in BENCH_ROUNDS
 *     interleaved rounds (bench/files.ts);
 *   - B5: knowledge search at 100,000 and 1,000,000 chunks, a common, a rare and a mixed query,
 *     lexical on Postgres and PGlite, hybrid on PGlite (which has pgvector: bench/knowledge.ts);
 *   - B6 (Postgres): webhook deliveries per second, automation slot claims on three instances
 *     (bench/workers.ts);
 *   - B7 (Postgres): bootstrap's latency next to the capabilities' (bench/bootstrap.ts);
 *   - chat (Postgres): the time to first token and the tool-call round trip the service adds to
 *     a local model server's, called directly in the same run (bench/chat.ts);
 *   - openai (Postgres): the time to first token `POST /v1/chat/completions` adds to a local model
 *     server's, called directly, beside chat's in the same run (bench/openai.ts);
 *   - a resumed watcher's lag behind the instance generating the reply (bench/watch.ts);
 *   - the audit export of 100,000 events.
 * Postgres: DATABASE_URL names the server (default postgres://postgres@127.0.0.1:5432/postgres);
 * the bench creates its own database there and drops it at the end. Without a reachable server,
 * only the PGlite parts run. BENCH_PROFILE_DIR=<dir> has every service process (and B1's peer and
 * limit) write a CPU profile. BENCH_ONLY=<parts> runs only the named parts, comma-separated, of:
 * startup, lists, throughput, load, files, knowledge, workers, bootstrap, chat, openai, watch, export; BENCH_ROUTES=<routes>
 * only the named list routes of B1. Every server runs on the Node that runs this script.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { openPostgres } from '../src/platform/db';
import { migrateToLatest } from '../src/platform/db/migrate';
import { loadDevAuthMaterial, signDevToken } from '../src/platform/tokens';
import { bootstrapBench } from './bootstrap';
import { chatBench } from './chat';
import { openAiBench } from './openai';
import { watchBench } from './watch';
import { filesBench } from './files';
import { knowledgeBench } from './knowledge';
import { loadBench } from './load';
import { pagesBench, SLICE_SECONDS, SLICES } from './pages';
import {
  clientCpu,
  CONNECTIONS,
  cpus,
  interleaved,
  peakRss,
  port,
  ratio,
  rates,
  ROUNDS,
  rssMiB,
  serverCpu,
  spawnPinned,
  stop,
  waitReady,
  wrkPass,
} from './process';
import { workersBench } from './workers';

const DURATION = process.env.BENCH_SECONDS ?? '10';
const ONLY = process.env.BENCH_ONLY?.split(',').map((part) => part.trim());
const selected = (part: string) => !ONLY || ONLY.includes(part);

function wrk(url: string, headers: string[] = [], script?: string, seconds = DURATION): number {
  return wrkPass(url, headers, seconds, script).rate;
}

const EXPORT_EVENTS = 100_000;

/** Seeds 100,000 audit events (with the service stopped), then streams their export from the service. */
async function auditExport(dataDir: string, env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  const database = await openPostgres(env.DATABASE_URL as string, { poolSize: 2 });
  const resourceType = 'bench';
  try {
    await sql`
      insert into audit_events (id, action, actor_user_id, resource_type, resource_id, outcome, request_id, metadata, created_at)
      select ${resourceType} || '-' || lpad(g::text, 9, '0'), 'bench.event', 'bench-actor', ${resourceType}, 'r-' || g, 'success', null,
             jsonb_build_object('i', g, 'note', repeat('x', 40)), now()
      from generate_series(1, ${EXPORT_EVENTS}) as g`.execute(database.db);
    await sql`insert into administrative_principals (user_id, role, reason, granted_by) values ('bench-user', 'auditor', 'bench', 'bench')
              on conflict do nothing`.execute(database.db);
  } finally {
    await database.close();
  }
  const base = `http://127.0.0.1:${env.PORT}`;
  const service = spawnPinned(serverCpu, ['dist/src/server.js'], env);
  try {
    await waitReady(`${base}/readyz`);
    await fetch(`${base}/api/v1/notes?limit=20`, { headers: { authorization: `Bearer ${token}` } });
    const before = rssMiB(service.pid as number);
    const sampler = peakRss(service.pid as number);
    const started = performance.now();
    const res = await fetch(`${base}/api/v1/admin/audit/export?resourceType=${resourceType}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    let lines = 0;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      for (const byte of chunk) if (byte === 10) lines += 1;
    }
    const seconds = (performance.now() - started) / 1000;
    const peak = sampler.stop();
    if (res.status !== 200 || lines !== EXPORT_EVENTS) throw new Error(`export returned ${res.status} with ${lines} lines`);
    return [
      ['audit export, 100,000 events as NDJSON (events/s)', (lines / seconds).toFixed(0)],
      ['audit export: service RSS before (MiB)', before.toFixed(1)],
      ['audit export: service RSS peak during (MiB)', peak.toFixed(1)],
    ];
  } finally {
    await stop(service);
  }
}

/**
 * B2 and B3 on Postgres: the service's middleware on a constant authenticated body against bare
 * Express; the validated create.
 */
async function throughput(dataDir: string, env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  const rows: Array<[string, string]> = [];
  const auth = `Authorization: Bearer ${token}`;
  const service = `http://127.0.0.1:${env.PORT}`;
  const run = async (args: string[], childEnv: Record<string, string>, ready: string, measure: () => number) => {
    const child = spawnPinned(serverCpu, args, childEnv);
    try {
      await waitReady(ready);
      measure(); // warm-up pass, discarded
      return measure();
    } finally {
      await stop(child);
    }
  };
  const serviceEnv = { ...env, KNOWLEDGE_INDEX_INTERVAL_MS: '3600000' };
  {
    const [b2, bare] = await interleaved(
      () => run(['dist/src/server.js'], serviceEnv, `${service}/readyz`, () => wrk(`${service}/api/v1/capabilities`, [auth])),
      () =>
        run(['--import', 'tsx', 'bench/bare-express.ts'], { PORT: port(1) }, `http://127.0.0.1:${port(1)}/capabilities`, () =>
          wrk(`http://127.0.0.1:${port(1)}/capabilities`),
        ),
    );
    rows.push(['B2 GET /api/v1/capabilities, authenticated, constant body (req/s)', rates(b2)]);
    rows.push(['B2 bare Express, same body (req/s)', rates(bare)]);
    rows.push(['B2 ratio service / bare Express (goal ≥ 0.6)', ratio(b2, bare)]);

    const script = path.join(dataDir, 'create-note.lua');
    fs.writeFileSync(
      script,
      `wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = '{"title":"Created by wrk","content":"A validated create."}'\n`,
    );
    const b3 = await run(['dist/src/server.js'], serviceEnv, `${service}/readyz`, () => wrk(`${service}/api/v1/notes`, [auth], script));
    rows.push(['B3 POST /api/v1/notes, validated create (req/s)', b3.toFixed(0)]);
  }
  return rows;
}

/** A fresh database on the Postgres server of `serverUrl` (null when no server answers). */
async function benchDatabase(serverUrl: string): Promise<{ url: string; drop: () => Promise<void> } | null> {
  const name = `aiws_bench_${process.pid}`;
  let admin;
  try {
    admin = await openPostgres(serverUrl, { poolSize: 1 });
    await sql`select 1`.execute(admin.db);
  } catch {
    await admin?.close();
    return null;
  }
  await sql`create database ${sql.id(name)}`.execute(admin.db);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      await sql`drop database if exists ${sql.id(name)} with (force)`.execute(admin.db);
      await admin.close();
    },
  };
}

/** Brings the bench database's schema up to date (done by the start-up part when it runs). */
async function migrated(url: string): Promise<void> {
  const database = await openPostgres(url, { poolSize: 1 });
  try {
    await migrateToLatest(database.db);
  } finally {
    await database.close();
  }
}

/** Start-up to ready, first on an empty database and then again; idle RSS two seconds after. */
async function startUp(label: string, env: Record<string, string>): Promise<Array<[string, string]>> {
  const base = `http://127.0.0.1:${env.PORT}`;
  let service = spawnPinned(serverCpu, ['dist/src/server.js'], env);
  const first = await waitReady(`${base}/readyz`);
  await stop(service);
  service = spawnPinned(serverCpu, ['dist/src/server.js'], env);
  try {
    const restart = await waitReady(`${base}/readyz`);
    await new Promise((r) => setTimeout(r, 2000));
    return [
      [`start-up on ${label}, empty database (s)`, (first / 1000).toFixed(2)],
      [`start-up on ${label}, restart (s)`, (restart / 1000).toFixed(2)],
      [`idle RSS on ${label}, 2 s after ready (MiB)`, rssMiB(service.pid as number).toFixed(1)],
    ];
  } finally {
    await stop(service);
  }
}

/** The load averages over 1, 5 and 15 minutes, as the kernel gives them. */
const loadAverage = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** A part's rows and the load average at its start and end (docs/performance.md gives both). */
async function part(name: string, measure: () => Promise<Array<[string, string]>>): Promise<Array<[string, string]>> {
  const start = loadAverage();
  const measured = await measure();
  return [...measured, [`${name} load average (1, 5, 15 min) at start / end`, `${start} / ${loadAverage()}`]];
}

async function main(): Promise<void> {
  // The bench's own clients (B5's queries, the export's reader; B4's transfer processes, which
  // also pin themselves) run on the client's core, like wrk, not on whichever core the scheduler
  // picks, which was at times the service's own. Every thread of the process, and those it starts later.
  execFileSync('taskset', ['-a', '-p', '-c', clientCpu, String(process.pid)], { stdio: 'ignore' });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-bench-'));
  // The per-user limit stays on (its count is part of each request's cost), far above what wrk sends.
  const env = { DATA_DIR: dataDir, PORT: port(0), LOG_LEVEL: 'info', NODE_ENV: 'development', RATE_LIMIT_PER_MINUTE: '1000000' };
  // Each figure is also printed as it is measured, so that a later failure loses none.
  const rows = {
    list: [] as Array<[string, string]>,
    push(...measured: Array<[string, string]>) {
      for (const [k, v] of measured) console.error(`${k}: ${v}`);
      this.list.push(...measured);
    },
  };
  const postgres = await benchDatabase(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  try {
    // DATABASE_URL empty: the service's children inherit the bench's environment, which may name Postgres.
    if (selected('startup'))
      rows.push(
        ...(await part('startup (PGlite)', () =>
          startUp('PGlite', { ...env, DATA_DIR: path.join(dataDir, 'pglite-startup'), DATABASE_URL: '' }),
        )),
      );
    if (postgres) {
      const pgEnv = { ...env, DATABASE_URL: postgres.url };
      if (selected('startup')) rows.push(...(await part('startup (Postgres)', () => startUp('Postgres', pgEnv))));
      else await migrated(postgres.url);
      const token = await signDevToken(await loadDevAuthMaterial(dataDir), 'bench-user');
      if (selected('lists')) rows.push(...(await pagesBench(dataDir, pgEnv, token)));
      if (selected('throughput')) rows.push(...(await part('B2, B3', () => throughput(dataDir, pgEnv, token))));
      if (selected('load')) rows.push(...(await part('load', () => loadBench(pgEnv, dataDir, token))));
      if (selected('files')) rows.push(...(await part('B4', () => filesBench({ ...pgEnv, PORT: port(3) }))));
      if (selected('knowledge'))
        rows.push(...(await part('B5', () => knowledgeBench((line) => console.error(`knowledge: ${line}`), postgres.url))));
      if (selected('workers')) rows.push(...(await part('B6', () => workersBench({ ...pgEnv, PORT: port(5) }))));
      if (selected('bootstrap')) rows.push(...(await part('B7', () => bootstrapBench({ ...pgEnv, PORT: port(0) }, token))));
      if (selected('chat')) rows.push(...(await part('chat', () => chatBench({ ...pgEnv, PORT: port(0) }, token))));
      if (selected('openai')) rows.push(...(await part('openai', () => openAiBench({ ...pgEnv, PORT: port(0) }, token))));
      if (selected('watch')) rows.push(...(await part('watch', () => watchBench({ ...pgEnv, PORT: port(0) }, port(1), token))));
      if (selected('export')) rows.push(...(await part('export', () => auditExport(dataDir, pgEnv, token))));
    } else {
      rows.push(['B1-B4, B6 (Postgres)', 'no Postgres server answered: set DATABASE_URL']);
      if (selected('knowledge')) rows.push(...(await knowledgeBench((line) => console.error(`knowledge: ${line}`))));
    }
  } finally {
    await postgres?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(
    `\nNode ${process.version} (${process.execPath}) for the service and every peer and limit, ${cpus} cores; wrk -t1 -c${CONNECTIONS} -d${DURATION}s ` +
      `(B1: ${ROUNDS} rounds of ${SLICES} slices of ${SLICE_SECONDS} s) on CPU ${clientCpu}, servers on CPU ${serverCpu}; service logs at info\n`,
  );
  const width = Math.max(...rows.list.map(([k]) => k.length));
  console.log(`| ${'measure'.padEnd(width)} | value |`);
  console.log(`|${'-'.repeat(width + 2)}|-------|`);
  for (const [k, v] of rows.list) console.log(`| ${k.padEnd(width)} | ${v} |`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
