/**
 * `make bench`: figures measured in one run, printed as a table with the Node version.
 *   - start-up on PGlite: first start (empty data directory) and restart, to the first 200 of /readyz;
 *   - throughput of GET /api/v1/notes?limit=20 (bearer JWT, validated, 20 rows) against bare
 *     Express serving a constant body of the same size: wrk on one core, servers on the other;
 *   - the validator's operation lookup, in-process: library mounting against the service's;
 *   - the audit export of 100,000 events: rate, and the service's RSS before and at its peak;
 *   - knowledge search at 100,000 chunks, lexical and hybrid, next to the raw SQL (bench/knowledge.ts).
 * Set DATABASE_URL to run the service on Postgres instead of PGlite.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { openPglite, openPostgres } from '../src/platform/db';
import { loadDevAuthMaterial, signDevToken } from '../src/platform/tokens';
import { knowledgeBench } from './knowledge';
import { measureLookup } from './validator-lookup';

const root = path.resolve(__dirname, '..');
const DURATION = process.env.BENCH_SECONDS ?? '10';
const CONNECTIONS = process.env.BENCH_CONNECTIONS ?? '32';
const cpus = os.cpus().length;
const serverCpu = '0';
const clientCpu = cpus > 1 ? '1' : '0';

function spawnPinned(cpu: string, args: string[], env: Record<string, string>): ChildProcess {
  return spawn('taskset', ['-c', cpu, process.execPath, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: 'ignore',
  });
}

async function waitReady(url: string, timeoutMs = 60_000): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    try {
      // Any answer below 500: /readyz says 503 until ready; a baseline's route says 401 without a token.
      if ((await fetch(url)).status < 500) return performance.now() - started;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${url} did not become ready`);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

function wrk(url: string, headers: string[] = [], script?: string): number {
  const args = ['-c', clientCpu, 'wrk', '-t1', `-c${CONNECTIONS}`, `-d${DURATION}s`, ...(script ? ['-s', script] : []), ...headers.flatMap((h) => ['-H', h]), url];
  const out = execFileSync('taskset', args, { encoding: 'utf8' });
  const match = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const errors = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
  if (!match || errors) throw new Error(`wrk failed:\n${out}`);
  return Number(match[1]);
}

function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

const EXPORT_EVENTS = 100_000;

/** Seeds 100,000 audit events (with the service stopped), then streams their export from the service. */
async function auditExport(dataDir: string, env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  const database = process.env.DATABASE_URL ? await openPostgres(process.env.DATABASE_URL, 2) : await openPglite(path.join(dataDir, 'pglite'));
  // The log is append-only, and a Postgres database outlives runs: each run exports its own events.
  const resourceType = `bench-${Date.now()}`;
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
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(service.pid as number))), 20);
    const started = performance.now();
    const res = await fetch(`${base}/api/v1/admin/audit/export?resourceType=${resourceType}`, { headers: { authorization: `Bearer ${token}` } });
    let lines = 0;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      for (const byte of chunk) if (byte === 10) lines += 1;
    }
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
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

const TABLE_ROWS = 100_000;

/**
 * B1–B3 on Postgres: the service against the peer (Fastify + jose + pg) and the limit (node:http +
 * jose + pg) reading 20 of the caller's rows from a notes table of 100,000; the service's
 * middleware on a constant authenticated body against bare Express; the validated create.
 */
async function throughput(dataDir: string, env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  const url = process.env.DATABASE_URL as string;
  const database = await openPostgres(url, 2);
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
  try {
    await sql`delete from notes where owner_user_id like 'bench-%'`.execute(database.db);
    await sql`
      insert into notes (id, owner_user_id, title, content, created_at, updated_at)
      select '01936d2e-7b1a-7c3e-' || lpad(g::text, 12, '0'),
             case when g % 100 = 0 then 'bench-user' else 'bench-other-' || (g % 97) end,
             'Bench note ' || g, repeat('Content of bench note ' || g || '. ', 4), now(), now()
      from generate_series(1, ${TABLE_ROWS}) as g`.execute(database.db);
    await sql`analyze notes`.execute(database.db);
    // No embedding pass during the measurement.
    const serviceEnv = { ...env, KNOWLEDGE_INDEX_INTERVAL_MS: '3600000' };
    const b1 = await run(['dist/src/server.js'], serviceEnv, `${service}/readyz`, () => wrk(`${service}/api/v1/notes?limit=20`, [auth]));
    const baseEnv = { PORT: '18183', DATA_DIR: dataDir, DATABASE_URL: url };
    const peer = await run(['--import', 'tsx', 'bench/baseline.ts', 'fastify'], baseEnv, 'http://127.0.0.1:18183/notes', () =>
      wrk('http://127.0.0.1:18183/notes?limit=20', [auth]),
    );
    const limit = await run(['--import', 'tsx', 'bench/baseline.ts', 'http'], baseEnv, 'http://127.0.0.1:18183/notes', () =>
      wrk('http://127.0.0.1:18183/notes?limit=20', [auth]),
    );
    rows.push([`B1 GET /api/v1/notes?limit=20, ${TABLE_ROWS.toLocaleString('en')}-row table (req/s)`, b1.toFixed(0)]);
    rows.push(['B1 peer: Fastify + jose + pg, same query (req/s)', peer.toFixed(0)]);
    rows.push(['B1 limit: node:http + jose + pg, same query (req/s)', limit.toFixed(0)]);
    rows.push(['B1 ratio service / peer (goal ≥ 1.0)', (b1 / peer).toFixed(3)]);
    rows.push(['B1 ratio service / limit (goal ≥ 0.7)', (b1 / limit).toFixed(3)]);

    const b2 = await run(['dist/src/server.js'], serviceEnv, `${service}/readyz`, () => wrk(`${service}/api/v1/capabilities`, [auth]));
    const bare = await run(['--import', 'tsx', 'bench/bare-express.ts'], { PORT: '18182' }, 'http://127.0.0.1:18182/notes', () =>
      wrk('http://127.0.0.1:18182/capabilities'),
    );
    rows.push(['B2 GET /api/v1/capabilities, authenticated, constant body (req/s)', b2.toFixed(0)]);
    rows.push(['B2 bare Express, same body (req/s)', bare.toFixed(0)]);
    rows.push(['B2 ratio service / bare Express (goal ≥ 0.6)', (b2 / bare).toFixed(3)]);

    const script = path.join(dataDir, 'create-note.lua');
    fs.writeFileSync(
      script,
      `wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = '{"title":"Created by wrk","content":"A validated create."}'\n`,
    );
    const b3 = await run(['dist/src/server.js'], serviceEnv, `${service}/readyz`, () => wrk(`${service}/api/v1/notes`, [auth], script));
    rows.push(['B3 POST /api/v1/notes, validated create (req/s)', b3.toFixed(0)]);
    return rows;
  } finally {
    await sql`delete from notes where owner_user_id like 'bench-%'`.execute(database.db);
    await database.close();
  }
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-bench-'));
  // The per-user limit stays on (its count is part of each request's cost), far above what wrk sends.
  const env = { DATA_DIR: dataDir, PORT: '18181', LOG_LEVEL: 'info', NODE_ENV: 'development', RATE_LIMIT_PER_MINUTE: '1000000' };
  const base = `http://127.0.0.1:${env.PORT}`;
  const rows: Array<[string, string]> = [];
  const database = process.env.DATABASE_URL ? 'Postgres' : 'PGlite';
  try {
    let service = spawnPinned(serverCpu, ['dist/src/server.js'], env);
    const firstStart = await waitReady(`${base}/readyz`);
    await stop(service);
    service = spawnPinned(serverCpu, ['dist/src/server.js'], env);
    const restart = await waitReady(`${base}/readyz`);
    rows.push([`start-up on ${database}, empty data directory (s)`, (firstStart / 1000).toFixed(2)]);
    rows.push([`start-up on ${database}, restart (s)`, (restart / 1000).toFixed(2)]);

    const token = await signDevToken(await loadDevAuthMaterial(dataDir), 'bench-user');
    const auth = `Authorization: Bearer ${token}`;
    for (let i = 0; i < 100; i += 1) {
      const res = await fetch(`${base}/api/v1/notes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ title: `Bench note ${i}`, content: `Content of bench note ${i}. `.repeat(4) }),
      });
      if (res.status !== 200) throw new Error(`seeding failed: ${res.status}`);
    }

    const bare = spawnPinned(serverCpu, ['--import', 'tsx', 'bench/bare-express.ts'], { PORT: '18182' });
    await waitReady('http://127.0.0.1:18182/notes');
    wrk(`${base}/api/v1/notes?limit=20`, [auth]); // warm-up pass, discarded
    const notes = wrk(`${base}/api/v1/notes?limit=20`, [auth]);
    const bareRps = wrk('http://127.0.0.1:18182/notes');
    await stop(bare);
    await stop(service);
    rows.push(['GET /api/v1/notes?limit=20 (req/s)', notes.toFixed(0)]);
    rows.push(['bare Express, same body size (req/s)', bareRps.toFixed(0)]);
    rows.push(['ratio service / bare Express', (notes / bareRps).toFixed(3)]);

    if (process.env.DATABASE_URL) rows.push(...(await throughput(dataDir, env, token)));
    else rows.push(['B1–B3 (the peer and the limit read Postgres)', 'set DATABASE_URL']);

    rows.push(...(await auditExport(dataDir, env, token)));

    rows.push(...(await knowledgeBench()));

    for (const row of await measureLookup()) {
      rows.push([`operation lookup, ${row.document}: library mount (µs)`, row.library.toFixed(2)]);
      rows.push([`operation lookup, ${row.document}: service mount (µs)`, row.service.toFixed(2)]);
      rows.push([`operation lookup, ${row.document}: ratio library / service`, (row.library / row.service).toFixed(1)]);
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(`\nNode ${process.version}, ${cpus} cores; wrk -t1 -c${CONNECTIONS} -d${DURATION}s on CPU ${clientCpu}, servers on CPU ${serverCpu}; service logs at info\n`);
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log(`| ${'measure'.padEnd(width)} | value |`);
  console.log(`|${'-'.repeat(width + 2)}|-------|`);
  for (const [k, v] of rows) console.log(`| ${k.padEnd(width)} | ${v} |`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
