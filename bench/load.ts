/**
 * Part `load` of `make bench` (Postgres): `GET /api/v1/notes?limit=20` at 8, 64, 256 and 1024
 * connections through the service as `make run` starts it (load shedding on; also with clients
 * that wait the refusal's Retry-After), with load shedding off, with V8's own young generation
 * and with a larger one, and the limit (bench/baseline.ts): requests per second, the 50th and
 * 99th percentile latency of every answer, and how many answers were `503 overloaded`. Each
 * contender and level: a warm-up pass, then BENCH_LOAD_PASSES passes (the median shown, with the
 * passes' range), the contenders in turn within each level.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { openPostgres } from '../src/platform/db';
import { LIST_ROUTES } from './lists';
import { clientCpu, percentile, port, serverCpu, spawnPinned, stop, waitReady } from './process';

const LEVELS = (process.env.BENCH_LOAD_CONNECTIONS ?? '8,64,256,1024').split(',').map(Number);
const PASSES = Number(process.env.BENCH_LOAD_PASSES ?? '3');
const SECONDS = process.env.BENCH_LOAD_SECONDS ?? '5';
/** A larger young generation than `make run`'s, for comparison (V8's semi-space, MiB). */
const LARGE_SEMI_SPACE_MB = '64';
const ROWS = 10_000;

interface Pass {
  rate: number;
  p50: number;
  p99: number;
  /** Answers other than 2xx (the service's are 503 overloaded). */
  refused: number;
  requests: number;
  /** Requests wrk gave up on (no answer within its 10 s timeout), and connection errors. */
  errors: number;
}

/** wrk's latency (`1.23ms`, `870.00us`, `1.02s`) in ms. */
function ms(value: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(value);
  if (!match) throw new Error(`wrk latency ${value}`);
  const scale = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[match[2] as 'us' | 'ms' | 's' | 'm'];
  return Number(match[1]) * scale;
}

/** One wrk pass at `connections` with its latency distribution; error answers are counted, not fatal. */
function pass(url: string, token: string, connections: number, seconds: string, script?: string): Pass {
  const out = execFileSync(
    'taskset',
    [
      '-c',
      clientCpu,
      'wrk',
      '-t1',
      `-c${connections}`,
      `-d${seconds}s`,
      '--timeout',
      '10s',
      '--latency',
      ...(script ? ['-s', script] : []),
      '-H',
      `Authorization: Bearer ${token}`,
      url,
    ],
    { encoding: 'utf8' },
  );
  const number = (pattern: RegExp) => Number(pattern.exec(out)?.[1] ?? 0);
  const latency = (p: string) => ms(new RegExp(`\\s${p}%\\s+(\\S+)`).exec(out)?.[1] ?? '0us');
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    rate: number(/Requests\/sec:\s+([\d.]+)/),
    p50: latency('50'),
    p99: latency('99'),
    refused: number(/Non-2xx or 3xx responses:\s+(\d+)/),
    requests: number(/(\d+) requests in /),
    errors: socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
  };
}

const median = (values: number[]) => percentile(values, 50);
const range = (values: number[], digits: number) =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;

export async function loadBench(env: Record<string, string>, dataDir: string, token: string): Promise<Array<[string, string]>> {
  const notes = LIST_ROUTES.find((route) => route.name === 'notes');
  const database = await openPostgres(env.DATABASE_URL as string, { poolSize: 2 });
  try {
    await notes?.seed(database.db, ROWS);
  } finally {
    await database.close();
  }
  const service: { args: string[]; env: Record<string, string> } = {
    args: ['dist/src/server.js'],
    env: { ...env, KNOWLEDGE_INDEX_INTERVAL_MS: '3600000' },
  };
  const semiSpace = (mb: string) => ({ ...service, args: [`--max-semi-space-size=${mb}`, ...service.args] });
  // Clients that wait the refusal's Retry-After (1 s) before their next request, as the OpenAI SDK
  // and the web app do (wrk runs one thread: the count is the thread's, over its connections).
  const patient = path.join(dataDir, 'retry-after.lua');
  fs.writeFileSync(
    patient,
    'local owed = 0\n' +
      'function response(status, headers, body) if status == 503 then owed = owed + 1 end end\n' +
      'function delay() if owed > 0 then owed = owed - 1 return 1000 end return 0 end\n',
  );
  const contenders: Record<string, { args: string[]; env: Record<string, string>; script?: string }> = {
    // As `make run` starts it (its young generation: BENCH_SEMI_SPACE_MB, from the Makefile).
    'service as make run starts it': service,
    'service, clients that wait Retry-After': { ...service, script: patient },
    'service, shedding off': { ...service, env: { ...service.env, LOAD_SHED_MAX_IN_FLIGHT: '0', LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0' } },
    "service, V8's own young generation": semiSpace('0'),
    [`service, semi-space ${LARGE_SEMI_SPACE_MB} MiB`]: semiSpace(LARGE_SEMI_SPACE_MB),
    limit: {
      args: ['--import', 'tsx', 'bench/baseline.ts'],
      env: { PORT: port(2), DATA_DIR: dataDir, DATABASE_URL: env.DATABASE_URL as string },
    },
  };
  const rows: Array<[string, string]> = [];
  for (const connections of LEVELS) {
    const measured: Record<string, Pass[]> = {};
    for (const [name, contender] of Object.entries(contenders)) {
      const at = contender.env.PORT as string;
      const child = spawnPinned(serverCpu, contender.args, contender.env);
      try {
        await waitReady(name === 'limit' ? `http://127.0.0.1:${at}/api/v1/notes` : `http://127.0.0.1:${at}/readyz`);
        const url = `http://127.0.0.1:${at}/api/v1/notes?limit=20`;
        pass(url, token, connections, '2', contender.script); // warm-up, discarded
        measured[name] = Array.from({ length: PASSES }, () => pass(url, token, connections, SECONDS, contender.script));
      } finally {
        await stop(child);
      }
    }
    const limitRate = median((measured.limit as Pass[]).map((p) => p.rate));
    for (const [name, passes] of Object.entries(measured)) {
      const label = `load, ${connections} connections, ${name}`;
      const refused = passes.map((p) => (100 * p.refused) / Math.max(1, p.requests));
      rows.push([
        `${label}: req/s, p50 / p99 ms, 503 % (median (range) of ${PASSES} passes)`,
        `${range(
          passes.map((p) => p.rate),
          0,
        )}, ${range(
          passes.map((p) => p.p50),
          1,
        )} / ${range(
          passes.map((p) => p.p99),
          1,
        )}, ${range(refused, 1)}${passes.some((p) => p.errors > 0) ? `, wrk errors ${passes.map((p) => p.errors).join('/')}` : ''}`,
      ]);
      if (name !== 'limit') {
        // Answered requests only: the 503s are not throughput.
        const served = passes.map((p) => (p.rate * (p.requests - p.refused)) / Math.max(1, p.requests) / limitRate);
        rows.push([`${label}: answered 2xx / limit's rate`, range(served, 2)]);
      }
    }
  }
  return rows;
}
