/**
 * B1 of `make bench` (part `lists`, Postgres): the first page of every list route of
 * bench/lists.ts through the service, the plain peer (bench/peer.ts) and the limit
 * (bench/baseline.ts), in BENCH_ROUNDS alternating rounds (bench/README.md).
 */
import fs from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { openPostgres } from '../src/platform/db';
import { LIST_ROUTES } from './lists';
import { percentile, port, ROUNDS, serverCpu, spawnPinned, stop, waitReady, wrkPass } from './process';

const TABLE_ROWS = 100_000;
/** B1's passes: SLICES of SLICE_SECONDS per contender and route in each round. */
export const SLICES = Number(process.env.BENCH_SLICES ?? '3');
export const SLICE_SECONDS = Number(process.env.BENCH_SLICE_SECONDS ?? '3');

/** The list routes B1 measures: those BENCH_ROUTES names (comma-separated), or all of them. */
function measuredRoutes(): typeof LIST_ROUTES {
  const named = process.env.BENCH_ROUTES?.split(',').map((name) => name.trim());
  if (!named) return LIST_ROUTES;
  const unknown = named.filter((name) => !LIST_ROUTES.some((route) => route.name === name));
  if (unknown.length > 0)
    throw new Error(`BENCH_ROUTES: no list route ${unknown.join(', ')} (${LIST_ROUTES.map((route) => route.name).join(', ')})`);
  return LIST_ROUTES.filter((route) => named.includes(route.name));
}

/** The load averages over 1, 5 and 15 minutes, as the kernel gives them. */
const loadAverage = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/**
 * B1 on Postgres: every list route of bench/lists.ts, `GET ?limit=20` of the bench user's rows
 * from a table of 100,000, through the service, the plain peer (bench/peer.ts) and the limit
 * (bench/baseline.ts), all on this Node, in BENCH_ROUNDS rounds; before each round's passes, each
 * route's body from the limit must equal the service's byte for byte, and the peer's must be the
 * same JSON (res.json writes its own key order).
 */
export async function pagesBench(dataDir: string, env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  const routes = measuredRoutes();
  const url = env.DATABASE_URL as string;
  const database = await openPostgres(url, { poolSize: 2 });
  try {
    for (const route of LIST_ROUTES) await route.seed(database.db, TABLE_ROWS);
  } finally {
    await database.close();
  }
  const auth = `Authorization: Bearer ${token}`;
  // No embedding pass during the measurement.
  const serviceEnv = { ...env, KNOWLEDGE_INDEX_INTERVAL_MS: '3600000' };
  const script = (file: string, at: string) => ({
    args: ['--import', 'tsx', file],
    env: { PORT: at, DATA_DIR: dataDir, DATABASE_URL: url },
    base: `http://127.0.0.1:${at}/api/v1`,
    ready: `http://127.0.0.1:${at}/api/v1/notes`,
  });
  const contenders = {
    service: {
      args: ['dist/src/server.js'],
      env: serviceEnv,
      base: `http://127.0.0.1:${env.PORT}/api/v1`,
      ready: `http://127.0.0.1:${env.PORT}/readyz`,
    },
    peer: script('bench/peer.ts', port(3)),
    limit: script('bench/baseline.ts', port(2)),
  };
  type Name = keyof typeof contenders;
  const names = Object.keys(contenders) as Name[];
  /** Starts every contender (idle ones cost nothing), runs `work` with their base URLs and pids, stops them. */
  const serve = async <T>(work: (bases: Record<Name, string>, pids: Record<Name, number>) => Promise<T>): Promise<T> => {
    const children = names.map((name) => spawnPinned(serverCpu, contenders[name].args, contenders[name].env));
    try {
      for (const [i, name] of names.entries()) {
        await waitReady(contenders[name].ready);
        if (children[i]?.exitCode !== null) throw new Error(`B1 ${name} exited: is its port taken (BENCH_PORTS)?`);
      }
      const each = <V>(value: (name: Name, i: number) => V) =>
        Object.fromEntries(names.map((name, i) => [name, value(name, i)])) as Record<Name, V>;
      return await work(
        each((name) => contenders[name].base),
        each((_name, i) => children[i]?.pid as number),
      );
    } finally {
      await Promise.all(children.map((child) => stop(child)));
    }
  };
  const body = async (base: string, route: string) => {
    const res = await fetch(`${base}/${route}?limit=20`, { headers: { authorization: `Bearer ${token}` } });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`B1 ${base}/${route}: ${res.status} ${text}`);
    return text;
  };
  const now = () => process.hrtime.bigint() / 1000n; // µs of the monotonic clock, which the CPU profiles use

  // Each round starts the three servers and measures each route on each of them in turn, in short
  // slices (service, peer, limit, then again): a route's ratio is the median of its slices' ratios,
  // each taken from passes seconds apart, since this machine's rates drift by a third within a
  // minute. The rates shown are each round's means.
  const meanRates = Object.fromEntries(names.map((name) => [name, routes.map(() => [] as number[])])) as Record<Name, number[][]>;
  const toPeer = routes.map(() => [] as number[]);
  const toLimit = routes.map(() => [] as number[]);
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const loadAtStart = loadAverage();
  for (let round = 0; round < ROUNDS; round += 1) {
    await serve(async (bases, pids) => {
      // All at once, before wrk runs: a keep-alive connection left idle for longer may be closed under a later fetch.
      for (const route of routes) {
        const served = await body(bases.service, route.name);
        const limit = await body(bases.limit, route.name);
        if (limit !== served) throw new Error(`B1 ${route.name}: the limit's body differs from the service's\n${served}\n${limit}`);
        const peer = await body(bases.peer, route.name);
        if (peer !== served && !isDeepStrictEqual(JSON.parse(peer), JSON.parse(served))) {
          throw new Error(`B1 ${route.name}: the peer's JSON differs from the service's\n${served}\n${peer}`);
        }
        if (peer !== served && round === 0)
          console.error(`B1 ${route.name}: the peer's body is the service's JSON, its keys in another order`);
      }
      // What each process answered in the passes, and when: the window of its profile to summarize.
      const passes = Object.fromEntries(names.map((name) => [name, { requests: 0, from: 0n, to: 0n }])) as Record<
        Name,
        { requests: number; from: bigint; to: bigint }
      >;
      const pass = (name: Name, route: string, seconds: string) => {
        const counted = passes[name];
        const from = now();
        if (counted.from === 0n) counted.from = from;
        const result = wrkPass(`${bases[name]}/${route}?limit=20`, [auth], seconds);
        counted.requests += result.requests;
        counted.to = now();
        return result.rate;
      };
      for (const [i, route] of routes.entries()) {
        for (const name of names) pass(name, route.name, '2'); // warm-up pass, discarded
        const slices = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<Name, number[]>;
        for (let slice = 0; slice < SLICES; slice += 1) {
          for (const name of names) slices[name].push(pass(name, route.name, String(SLICE_SECONDS)));
        }
        for (const name of names) meanRates[name][i]?.push(mean(slices[name]));
        const sliceRatios = (other: Name) =>
          percentile(
            slices.service.map((value, k) => value / (slices[other][k] as number)),
            50,
          );
        toPeer[i]?.push(sliceRatios('peer'));
        toLimit[i]?.push(sliceRatios('limit'));
      }
      if (process.env.BENCH_PROFILE_DIR) {
        for (const name of names) {
          const { requests, from, to } = passes[name];
          const profile = path.join(process.env.BENCH_PROFILE_DIR, `CPU.*.${pids[name]}.*.cpuprofile`);
          console.error(
            `B1 round ${round + 1}, the ${name}'s profile: node --import tsx bench/profile-summary.ts ${profile} ${requests} ${from} ${to}`,
          );
        }
      }
    });
  }
  const loadAtEnd = loadAverage();
  const median = (values: number[]) => percentile(values, 50);
  const spread = (values: number[], digits: number) =>
    `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
  const rows: Array<[string, string]> = [[`B1 load average (1, 5, 15 min) at start / end`, `${loadAtStart} / ${loadAtEnd}`]];
  for (const [i, route] of routes.entries()) {
    const label = `B1 GET /api/v1/${route.name}?limit=20, ${TABLE_ROWS.toLocaleString('en')}-row table`;
    const shown = names.map((name) => spread(meanRates[name][i] as number[], 0));
    rows.push([`${label}: service / peer / limit (req/s, median of rounds (min–max))`, shown.join(' / ')]);
    rows.push([`${label}: service / peer (goal ≥ 1.5, aim 2)`, spread(toPeer[i] as number[], 2)]);
    rows.push([`${label}: service / limit`, spread(toLimit[i] as number[], 2)]);
  }
  return rows;
}
