/** What the bench's parts share: pinned child processes, readiness, memory readings. */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const root = path.resolve(__dirname, '..');
export const cpus = os.cpus().length;
/** Servers run on one core, wrk (and the bench's own clients) on the other. */
export const serverCpu = '0';
export const clientCpu = cpus > 1 ? '1' : '0';

/** With BENCH_PROFILE_DIR set, every service process writes a CPU profile there when it stops. */
const profile = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];

/** The service runs with the Node flags `make run` gives it (SERVICE_NODE_FLAGS, set by make bench). */
const serviceFlags = (process.env.SERVICE_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== '');

export function spawnPinned(cpu: string, args: string[], env: Record<string, string>): ChildProcess {
  const flags = args[0] === 'dist/src/server.js' ? [...serviceFlags, ...profile] : [];
  return spawn('taskset', ['-c', cpu, process.execPath, ...flags, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: 'ignore',
  });
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
