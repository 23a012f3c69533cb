/** What the bench's parts share: pinned child processes, wrk passes, readiness, memory readings. */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

export const root = path.resolve(__dirname, '..');
export const cpus = os.cpus().length;
/**
 * The bench's servers listen on six ports from BENCH_PORTS (default 18181): another bench running
 * on the same machine must be given other ones.
 */
export const port = (offset: number) => String(Number(process.env.BENCH_PORTS ?? '18181') + offset);

/** Servers run on one core, wrk (and the bench's own clients) on the other. */
export const serverCpu = '0';
export const clientCpu = cpus > 1 ? '1' : '0';

/**
 * With BENCH_PROFILE_DIR set, every service process and B1's peer and limit write a CPU profile
 * there when they stop (bench/profile-summary.ts summarizes one).
 */
const profile = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
const profiled = (args: string[]) =>
  args.includes('dist/src/server.js') || args.includes('bench/baseline.ts') || args.includes('bench/peer.ts');

/**
 * Starts `args` on `cpu` with this process's Node (the service as `make run` starts it: `node
 * --max-semi-space-size=<BENCH_SEMI_SPACE_MB> dist/src/server.js`); BENCH_DEBUG_SERVICE=1 shows the
 * service's logs.
 */
export function spawnPinned(cpu: string, args: string[], env: Record<string, string>): ChildProcess {
  // The service with the young generation `make run` gives it, unless the caller names its own.
  const flags =
    args[0] === 'dist/src/server.js' && process.env.BENCH_SEMI_SPACE_MB ? [`--max-semi-space-size=${process.env.BENCH_SEMI_SPACE_MB}`] : [];
  return spawn('taskset', ['-c', cpu, process.execPath, ...(profiled(args) ? profile : []), ...flags, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: process.env.BENCH_DEBUG_SERVICE ? ['ignore', 'inherit', 'inherit'] : 'ignore',
  });
}

/** wrk's connections (BENCH_CONNECTIONS). */
export const CONNECTIONS = process.env.BENCH_CONNECTIONS ?? '32';

/** The rate wrk reports and the requests it counted; throws when it saw an error response. */
function wrkResult(out: string): { rate: number; requests: number } {
  const match = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const requests = /(\d+) requests in /.exec(out);
  const errors = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
  if (!match || !requests || errors) throw new Error(`wrk failed:\n${out}`);
  return { rate: Number(match[1]), requests: Number(requests[1]) };
}

/** One wrk pass of `seconds` on CONNECTIONS connections, from the client's core (with a Lua `script`): its rate and requests. */
export function wrkPass(url: string, headers: string[], seconds: string, script?: string): { rate: number; requests: number } {
  const args = [
    '-c',
    clientCpu,
    'wrk',
    '-t1',
    `-c${CONNECTIONS}`,
    `-d${seconds}s`,
    ...(script ? ['-s', script] : []),
    ...headers.flatMap((h) => ['-H', h]),
    url,
  ];
  return wrkResult(execFileSync('taskset', args, { encoding: 'utf8' }));
}

/** Runs a script to its end on `cpu` (with tsx); what it printed. */
export async function outputOf(cpu: string, args: string[], env: Record<string, string>): Promise<string> {
  const { stdout } = await promisify(execFile)('taskset', ['-c', cpu, process.execPath, '--import', 'tsx', ...args], {
    cwd: root,
    env: { ...process.env, ...env },
  });
  return stdout;
}

export async function waitReady(url: string, timeoutMs = 60_000): Promise<number> {
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

/** Resolves once a TCP server accepts connections on 127.0.0.1:`port` (the connection is closed at once). */
export async function waitListening(port: number, timeoutMs = 60_000): Promise<void> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    const accepted = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true))).once('error', () => resolve(false));
    });
    if (accepted) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`nothing listens on port ${port}`);
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

export function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** Samples a process's RSS every 20 ms until stopped; returns the peak. */
export function peakRss(pid: number): { stop(): number } {
  let peak = rssMiB(pid);
  const timer = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 20);
  return { stop: () => (clearInterval(timer), Math.max(peak, rssMiB(pid))) };
}

/** The value at percentile `p` of `values` (nearest rank; p 50 of an odd count is its median). */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

/** B1, B2 and B4 measure their contenders in turn this many times (BENCH_ROUNDS; odd, so that the middle round is the median). */
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? '5');

/**
 * Measures each contender once per round, in turn, for ROUNDS rounds: a slow or fast moment of the
 * machine (rates here move by a tenth between minutes) then falls on every contender of a round
 * rather than on one of them. Each contender's rates, by round.
 */
export async function interleaved<T extends Array<() => Promise<number>>>(...contenders: T): Promise<{ [K in keyof T]: number[] }> {
  const results = contenders.map(() => [] as number[]);
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const [i, measure] of contenders.entries()) results[i]?.push(await measure());
  }
  return results as { [K in keyof T]: number[] };
}

/** The median rate, with each round's. */
export const rates = (values: number[]) => `${percentile(values, 50).toFixed(0)} (${values.map((v) => v.toFixed(0)).join(', ')})`;

/** The median of the rounds' ratios (each round's two rates measured minutes apart at most), with each round's. */
export function ratio(service: number[], baseline: number[]): string {
  const each = service.map((value, i) => value / (baseline[i] as number));
  return `${percentile(each, 50).toFixed(3)} (${each.map((v) => v.toFixed(3)).join(', ')})`;
}
