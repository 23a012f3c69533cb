/**
 * `make bench`: the figures of #12 measured in one run, printed as one table with the Node
 * version. Servers run on one core and wrk (or the bench's own clients) on the other.
 *   - start-up to the first 200 of /readyz (PGlite: first start and restart; Postgres: a fresh
 *     database, then a restart) and idle RSS two seconds after;
 *   - B1 (Postgres, part `lists`): every list route of bench/lists.ts, GET ?limit=20 from tables
 *     of 100,000 rows, against the node:http limit and the Fastify peer (bench/baseline.ts), in
 *     BENCH_ROUNDS alternating rounds (default 5: the median ratio per route), and the service and
 *     the limit served at once on their core;
 *   - B2-B3 (Postgres, part `throughput`): an authenticated constant route against bare Express
 *     (in BENCH_ROUNDS interleaved rounds), the validated create;
 *   - B4: a 256 MiB upload and download against the raw stores and bare HTTP, in BENCH_ROUNDS
 *     interleaved rounds (bench/files.ts);
 *   - B5: knowledge search at 100,000 chunks, lexical and hybrid, next to the raw SQL (PGlite,
 *     which has pgvector: bench/knowledge.ts);
 *   - B6 (Postgres): webhook deliveries per second, automation slot claims on three instances
 *     (bench/workers.ts);
 *   - B7 (Postgres): bootstrap's latency next to the capabilities' (bench/bootstrap.ts);
 *   - chat (Postgres): the time to first token and the tool-call round trip the service adds to
 *     a local model server's, called directly in the same run (bench/chat.ts);
 *   - the audit export of 100,000 events, and request validation in-process (the library's and the service's).
 * Postgres: DATABASE_URL names the server (default postgres://postgres@127.0.0.1:5432/postgres);
 * the bench creates its own database there and drops it at the end. Without a reachable server,
 * only the PGlite parts run. BENCH_PROFILE_DIR=<dir> has every service process write a CPU profile.
 * BENCH_ONLY=<parts> runs only the named parts, comma-separated, of: startup, lists, throughput, files,
 * knowledge, workers, bootstrap, chat, export, lookup; BENCH_ROUTES=<routes> only the named list
 * routes of B1 (its "of the best route's" then among those).
 */
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { openPostgres } from '../src/platform/db';
import { migrateToLatest } from '../src/platform/db/migrate';
import { loadDevAuthMaterial, signDevToken } from '../src/platform/tokens';
import { bootstrapBench } from './bootstrap';
import { chatBench } from './chat';
import { filesBench } from './files';
import { knowledgeBench } from './knowledge';
import { LIST_ROUTES } from './lists';
import { clientCpu, cpus, interleaved, peakRss, percentile, port, ratio, rates, ROUNDS, rssMiB, serverCpu, spawnPinned, stop, waitReady } from './process';
import { measureLookup } from './validator-lookup';
import { workersBench } from './workers';

const DURATION = process.env.BENCH_SECONDS ?? '10';
const CONNECTIONS = process.env.BENCH_CONNECTIONS ?? '32';
const ONLY = process.env.BENCH_ONLY?.split(',').map((part) => part.trim());
const selected = (part: string) => !ONLY || ONLY.includes(part);

const wrkArgs = (url: string, headers: string[], script: string | undefined, seconds: string, connections = CONNECTIONS) =>
  ['-c', clientCpu, 'wrk', '-t1', `-c${connections}`, `-d${seconds}s`, ...(script ? ['-s', script] : []), ...headers.flatMap((h) => ['-H', h]), url];

/** The rate wrk reports; throws when it saw an error response. */
function wrkRate(out: string): number {
  const match = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const errors = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
  if (!match || errors) throw new Error(`wrk failed:\n${out}`);
  return Number(match[1]);
}

function wrk(url: string, headers: string[] = [], script?: string, seconds = DURATION): number {
  return wrkRate(execFileSync('taskset', wrkArgs(url, headers, script, seconds), { encoding: 'utf8' }));
}

/** Runs wrk on each URL at the same time, each with half the connections; their rates. */
async function wrkAtOnce(urls: string[], headers: string[], seconds: string): Promise<number[]> {
  const half = String(Math.max(1, Math.floor(Number(CONNECTIONS) / 2)));
  const run = promisify(execFile);
  return Promise.all(urls.map(async (url) => wrkRate((await run('taskset', wrkArgs(url, headers, undefined, seconds, half))).stdout)));
}

const EXPORT_EVENTS = 100_000;

/** Seeds 100,000 audit events (with the service stopped), then streams their export from the service. */
async function auditExport(dataDir: string, env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  const database = await openPostgres(env.DATABASE_URL as string, 2);
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
    const res = await fetch(`${base}/api/v1/admin/audit/export?resourceType=${resourceType}`, { headers: { authorization: `Bearer ${token}` } });
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

const TABLE_ROWS = 100_000;
/** B1's passes: SLICES of SLICE_SECONDS per contender and route in each round. */
const SLICES = Number(process.env.BENCH_SLICES ?? '3');
const SLICE_SECONDS = Number(process.env.BENCH_SLICE_SECONDS ?? '3');

/** The list routes B1 measures: those BENCH_ROUTES names (comma-separated), or all of them. */
function measuredRoutes(): typeof LIST_ROUTES {
  const named = process.env.BENCH_ROUTES?.split(',').map((name) => name.trim());
  if (!named) return LIST_ROUTES;
  const unknown = named.filter((name) => !LIST_ROUTES.some((route) => route.name === name));
  if (unknown.length > 0) throw new Error(`BENCH_ROUTES: no list route ${unknown.join(', ')} (${LIST_ROUTES.map((route) => route.name).join(', ')})`);
  return LIST_ROUTES.filter((route) => named.includes(route.name));
}

/**
 * B1 on Postgres: every list route of bench/lists.ts, `GET ?limit=20` of the bench user's rows
 * from a table of 100,000, through the service, the limit (node:http) and the peer (Fastify) of
 * bench/baseline.ts, in BENCH_ROUNDS rounds; each route's body from the limit and the peer must
 * equal the service's.
 */
async function lists(dataDir: string, env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  const routes = measuredRoutes();
  const url = env.DATABASE_URL as string;
  const database = await openPostgres(url, 2);
  try {
    for (const route of LIST_ROUTES) await route.seed(database.db, TABLE_ROWS);
  } finally {
    await database.close();
  }
  const auth = `Authorization: Bearer ${token}`;
  // No embedding pass during the measurement.
  const serviceEnv = { ...env, KNOWLEDGE_INDEX_INTERVAL_MS: '3600000' };
  const baseline = (kind: string, at: string) => ({
    args: ['--import', 'tsx', 'bench/baseline.ts', kind],
    env: { PORT: at, DATA_DIR: dataDir, DATABASE_URL: url },
    base: `http://127.0.0.1:${at}`,
    ready: `http://127.0.0.1:${at}/notes`,
  });
  const contenders = {
    service: { args: ['dist/src/server.js'], env: serviceEnv, base: `http://127.0.0.1:${env.PORT}/api/v1`, ready: `http://127.0.0.1:${env.PORT}/readyz` },
    limit: baseline('http', port(2)),
    peer: baseline('fastify', port(3)),
  };
  type Name = keyof typeof contenders;
  const names = Object.keys(contenders) as Name[];
  /** Starts every contender (idle ones cost nothing), runs `work` with their base URLs, stops them. */
  const serve = async <T>(work: (bases: Record<Name, string>) => Promise<T>): Promise<T> => {
    const children = names.map((name) => spawnPinned(serverCpu, contenders[name].args, contenders[name].env));
    try {
      for (const [i, name] of names.entries()) {
        await waitReady(contenders[name].ready);
        if (children[i]?.exitCode !== null) throw new Error(`B1 ${name} exited: is its port taken (BENCH_PORTS)?`);
      }
      return await work(Object.fromEntries(names.map((name) => [name, contenders[name].base])) as Record<Name, string>);
    } finally {
      await Promise.all(children.map((child) => stop(child)));
    }
  };
  const body = async (base: string, route: string) =>
    (await fetch(`${base}/${route}?limit=20`, { headers: { authorization: `Bearer ${token}` } })).text();

  // Each round starts the three servers and measures each route on each of them in turn, in short
  // slices (service, limit, peer, then again): a route's ratio to the limit is the median of its
  // slices' ratios, each taken from passes seconds apart, since this machine's rates drift by a
  // third within a minute. The rates shown are each round's means.
  const meanRates = Object.fromEntries(names.map((name) => [name, routes.map(() => [] as number[])])) as Record<Name, number[][]>;
  const toLimit = routes.map(() => [] as number[]);
  const toPeer = routes.map(() => [] as number[]);
  const atOnce = routes.map(() => [] as number[]);
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  for (let round = 0; round < ROUNDS; round += 1) {
    await serve(async (bases) => {
      // All at once, before wrk runs: a keep-alive connection left idle for longer may be closed under a later fetch.
      for (const route of routes) {
        const served = await body(bases.service, route.name);
        for (const name of ['limit', 'peer'] as const) {
          const other = await body(bases[name], route.name);
          if (other !== served) throw new Error(`B1 ${route.name}: the ${name}'s body differs from the service's\n${served}\n${other}`);
        }
      }
      for (const [i, route] of routes.entries()) {
        const url = (name: Name) => `${bases[name]}/${route.name}?limit=20`;
        for (const name of names) wrk(url(name), [auth], undefined, '2'); // warm-up pass, discarded
        const slices = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<Name, number[]>;
        for (let slice = 0; slice < SLICES; slice += 1) {
          for (const name of names) slices[name].push(wrk(url(name), [auth], undefined, String(SLICE_SECONDS)));
        }
        for (const name of names) meanRates[name][i]?.push(mean(slices[name]));
        const sliceRatios = (other: Name) => percentile(slices.service.map((value, k) => value / (slices[other][k] as number)), 50);
        toLimit[i]?.push(sliceRatios('limit'));
        toPeer[i]?.push(sliceRatios('peer'));
        // The service and the limit loaded at the same time on their one core: each gets about half
        // of it, so the ratio of their rates is about that of their CPU time per request, and a slow or
        // fast moment of the machine falls on both alike.
        const together: number[] = [];
        for (let slice = 0; slice < SLICES; slice += 1) {
          const [service, limit] = await wrkAtOnce([url('service'), url('limit')], [auth], String(SLICE_SECONDS));
          together.push((service as number) / (limit as number));
        }
        atOnce[i]?.push(percentile(together, 50));
      }
    });
  }
  const median = (values: number[]) => percentile(values, 50);
  const shown = (values: number[]) => `${median(values).toFixed(3)} (${values.map((v) => v.toFixed(3)).join(', ')})`;
  const best = Math.max(...toLimit.map(median));
  const bestAtOnce = Math.max(...atOnce.map(median));
  const rows: Array<[string, string]> = [];
  for (const [i, route] of routes.entries()) {
    const label = `B1 GET /api/v1/${route.name}?limit=20, ${TABLE_ROWS.toLocaleString('en')}-row table`;
    rows.push([`${label}: service / limit / peer (req/s, medians)`, [meanRates.service, meanRates.limit, meanRates.peer].map((r) => median(r[i] as number[]).toFixed(0)).join(' / ')]);
    rows.push([`${label}: service / limit (goal ≥ 0.7), of the best route's`, `${shown(toLimit[i] as number[])}, ${(median(toLimit[i] as number[]) / best).toFixed(3)}`]);
    rows.push([`${label}: service / peer`, shown(toPeer[i] as number[])]);
    rows.push([`${label}: service / limit served at once, of the best route's`, `${shown(atOnce[i] as number[])}, ${(median(atOnce[i] as number[]) / bestAtOnce).toFixed(3)}`]);
  }
  return rows;
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
      () => run(['--import', 'tsx', 'bench/bare-express.ts'], { PORT: port(1) }, `http://127.0.0.1:${port(1)}/notes`, () => wrk(`http://127.0.0.1:${port(1)}/capabilities`)),
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
    admin = await openPostgres(serverUrl, 1);
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
  const database = await openPostgres(url, 1);
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
    if (selected('startup')) rows.push(...(await startUp('PGlite', { ...env, DATA_DIR: path.join(dataDir, 'pglite-startup'), DATABASE_URL: '' })));
    if (postgres) {
      const pgEnv = { ...env, DATABASE_URL: postgres.url };
      if (selected('startup')) rows.push(...(await startUp('Postgres', pgEnv)));
      else await migrated(postgres.url);
      const token = await signDevToken(await loadDevAuthMaterial(dataDir), 'bench-user');
      if (selected('lists')) rows.push(...(await lists(dataDir, pgEnv, token)));
      if (selected('throughput')) rows.push(...(await throughput(dataDir, pgEnv, token)));
      if (selected('files')) rows.push(...(await filesBench({ ...pgEnv, PORT: port(3) })));
      if (selected('knowledge')) rows.push(...(await knowledgeBench((line) => console.error(`knowledge: ${line}`))));
      if (selected('workers')) rows.push(...(await workersBench({ ...pgEnv, PORT: port(5) })));
      if (selected('bootstrap')) rows.push(...(await bootstrapBench({ ...pgEnv, PORT: port(0) }, token)));
      if (selected('chat')) rows.push(...(await chatBench({ ...pgEnv, PORT: port(0) }, token)));
      if (selected('export')) rows.push(...(await auditExport(dataDir, pgEnv, token)));
    } else {
      rows.push(['B1-B4, B6 (Postgres)', 'no Postgres server answered: set DATABASE_URL']);
      if (selected('knowledge')) rows.push(...(await knowledgeBench((line) => console.error(`knowledge: ${line}`))));
    }
    for (const row of selected('lookup') ? await measureLookup() : []) {
      rows.push([`validator, ${row.mounting}: start-up (ms) / per request, last GET path (µs)`, `${row.startupMs.toFixed(0)} / ${row.perRequestUs.toFixed(1)}`]);
    }
  } finally {
    await postgres?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(`\nNode ${process.version}, ${cpus} cores; wrk -t1 -c${CONNECTIONS} -d${DURATION}s on CPU ${clientCpu}, servers on CPU ${serverCpu}; service logs at info\n`);
  const width = Math.max(...rows.list.map(([k]) => k.length));
  console.log(`| ${'measure'.padEnd(width)} | value |`);
  console.log(`|${'-'.repeat(width + 2)}|-------|`);
  for (const [k, v] of rows.list) console.log(`| ${k.padEnd(width)} | ${v} |`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
