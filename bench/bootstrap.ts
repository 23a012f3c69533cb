/**
 * Bootstrap's latency (p50, p95) next to GET /api/v1/capabilities, measured by wrk on one
 * connection (one request at a time: the time the service takes, not queueing), in BENCH_ROUNDS
 * interleaved rounds; also bootstrap revalidated with its ETag (304). The caller has settings,
 * onboarding marks and a project, so every part of bootstrap reads something.
 * Alone: `BENCH_ONLY=bootstrap make bench`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { clientCpu, percentile, ROUNDS, serverCpu, spawnPinned, stop, waitReady } from './process';

const DURATION = process.env.BENCH_SECONDS ?? '10';

/** wrk prints the run's p50 and p95 latency (µs) after the run. */
const LATENCY_SCRIPT = `done = function(summary, latency, requests)
  io.write(string.format("p50 %d\\np95 %d\\nerrors %d\\n", latency:percentile(50), latency:percentile(95),
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
`;

function latency(url: string, headers: string[], script: string): { p50: number; p95: number } {
  const args = ['-c', clientCpu, 'wrk', '-t1', '-c1', `-d${DURATION}s`, '-s', script, ...headers.flatMap((h) => ['-H', h]), url];
  const out = execFileSync('taskset', args, { encoding: 'utf8' });
  const p50 = /p50 (\d+)/.exec(out);
  const p95 = /p95 (\d+)/.exec(out);
  if (!p50 || !p95 || /errors [1-9]/.test(out)) throw new Error(`wrk failed (${url}):\n${out}`);
  return { p50: Number(p50[1]) / 1000, p95: Number(p95[1]) / 1000 };
}

/** The rounds' median of p50 and of p95, in ms, with each round's. */
function summary(runs: Array<{ p50: number; p95: number }>): string {
  const p50s = runs.map((r) => r.p50);
  const p95s = runs.map((r) => r.p95);
  const each = runs.map((r) => `${r.p50.toFixed(2)}/${r.p95.toFixed(2)}`).join(', ');
  return `${percentile(p50s, 50).toFixed(2)} / ${percentile(p95s, 50).toFixed(2)} (${each})`;
}

export async function bootstrapBench(env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  const base = `http://127.0.0.1:${env.PORT}`;
  const auth = `Authorization: Bearer ${token}`;
  const scriptDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-bench-bootstrap-'));
  const script = path.join(scriptDir, 'latency.lua');
  fs.writeFileSync(script, LATENCY_SCRIPT);
  const service = spawnPinned(serverCpu, ['dist/src/server.js'], { ...env, KNOWLEDGE_INDEX_INTERVAL_MS: '3600000' });
  try {
    await waitReady(`${base}/readyz`);
    const call = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${base}${route}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (res.status !== 200) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
      return res;
    };
    await call('PATCH', '/api/v1/settings', { theme: 'dark', locale: 'en-GB', timeZone: 'Europe/Berlin', ui: { sidebar: 'collapsed' } });
    await call('POST', '/api/v1/onboarding/complete', { step: 'profile' });
    await call('POST', '/api/v1/projects', { name: 'Bench project', clientId: 'bench-bootstrap' });
    const etag = (await call('GET', '/api/v1/bootstrap')).headers.get('etag') as string;
    // wrk counts any status below 400 as a success: check once that the tag is answered 304.
    const revalidation = await fetch(`${base}/api/v1/bootstrap`, { headers: { authorization: `Bearer ${token}`, 'if-none-match': etag } });
    if (revalidation.status !== 304) throw new Error(`bootstrap with its ETag answered ${revalidation.status}, not 304`);

    const capabilities: Array<{ p50: number; p95: number }> = [];
    const bootstrap: Array<{ p50: number; p95: number }> = [];
    const revalidated: Array<{ p50: number; p95: number }> = [];
    latency(`${base}/api/v1/bootstrap`, [auth], script); // warm-up pass, discarded
    for (let round = 0; round < ROUNDS; round += 1) {
      capabilities.push(latency(`${base}/api/v1/capabilities`, [auth], script));
      bootstrap.push(latency(`${base}/api/v1/bootstrap`, [auth], script));
      revalidated.push(latency(`${base}/api/v1/bootstrap`, [auth, `If-None-Match: ${etag}`], script));
    }
    return [
      ['B7 GET /api/v1/capabilities, one connection: p50 / p95 (ms)', summary(capabilities)],
      ['B7 GET /api/v1/bootstrap, one connection: p50 / p95 (ms)', summary(bootstrap)],
      ['B7 GET /api/v1/bootstrap with its ETag (304): p50 / p95 (ms)', summary(revalidated)],
    ];
  } finally {
    await stop(service);
    fs.rmSync(scriptDir, { recursive: true, force: true });
  }
}
