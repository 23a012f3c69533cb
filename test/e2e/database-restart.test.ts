import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { loadDevAuthMaterial, signDevToken } from '../../src/platform/tokens';
import { freePort, listening, type Running, start } from '../helpers/process';
import { eventually } from '../helpers/receiver';

/**
 * A request on a connection of its own (`agent: false`): while the database is down the service
 * answers the load's requests and may close their pooled connections, and a pooled client that
 * reuses one just then fails with "other side closed".
 */
function call(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; header(name: string): string | undefined; json(): unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: init.method ?? 'GET', headers: init.headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, header: (name) => res.headers[name] as string | undefined, json: () => JSON.parse(text) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

// A private Postgres cluster (not the run's shared server, which other test files use at the
// same time) is stopped and started again under the service's feet. Postgres only: the
// embedded PGlite lives inside the service's process.
const bin = fs.existsSync('/usr/lib/postgresql') ? path.join('/usr/lib/postgresql', fs.readdirSync('/usr/lib/postgresql').sort().at(-1)!, 'bin') : '';
const runnable = process.env.TEST_DATABASE_URL !== undefined && bin !== '' && fs.existsSync(path.join(bin, 'initdb'));

/** Runs a Postgres binary as the postgres user when this process is root (initdb refuses root). */
function pg(tool: string, args: string[]): string {
  const command = path.join(bin, tool);
  return process.getuid?.() === 0
    ? execFileSync('runuser', ['-u', 'postgres', '--', command, ...args], { encoding: 'utf8' })
    : execFileSync(command, args, { encoding: 'utf8' });
}

(runnable ? describe : describe.skip)('the database restarting under load', () => {
  let dir: string;
  let port: number;
  let server: Running | undefined;
  const cluster = (action: 'start' | 'stop') =>
    pg('pg_ctl', ['-D', dir, '-w', '-l', path.join(dir, 'log'), ...(action === 'start' ? ['-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`] : ['-m', 'fast']), action]);

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-restart-'));
    if (process.getuid?.() === 0) execFileSync('chown', ['postgres', dir]);
    pg('initdb', ['-D', dir, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  }, 180_000);

  afterAll(async () => {
    server?.child.kill('SIGKILL');
    try {
      cluster('stop');
    } catch {
      // already stopped
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('/readyz goes red then green, requests fail fast with 503 meanwhile, and the process recovers by itself', async () => {
    port = await freePort();
    cluster('start');
    const httpPort = await freePort();
    server = start({
      PORT: String(httpPort),
      HOST: '127.0.0.1',
      DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/postgres`,
      DATA_DIR: path.join(dir, 'service'),
      LOG_LEVEL: 'info',
      NODE_ENV: 'development',
    });
    await listening(server);
    const base = `http://127.0.0.1:${httpPort}`;
    const token = await signDevToken(await loadDevAuthMaterial(path.join(dir, 'service')), 'restart-user');
    const headers = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
    const create = (name: string) => call(`${base}/api/v1/projects`, { method: 'POST', headers, body: JSON.stringify({ name }) });
    expect((await create('before')).status).toBe(200);
    expect((await call(`${base}/readyz`)).status).toBe(200);

    // Load: requests keep coming while the database goes away and comes back.
    let stop = false;
    const outcomes: { status: number; ms: number }[] = [];
    const load = (async () => {
      for (let i = 0; !stop; i += 1) {
        const began = Date.now();
        const res = await create(`load ${i}`).catch(() => null);
        outcomes.push({ status: res?.status ?? 0, ms: Date.now() - began });
      }
    })();

    await new Promise((resolve) => setTimeout(resolve, 300));
    cluster('stop');
    const down = await call(`${base}/readyz`);
    expect(down.status).toBe(503);
    expect(down.json()).toMatchObject({ status: 'not_ready', checks: { database: false } });
    const during = await create('during');
    expect(during.status).toBe(503);
    expect(during.header('retry-after')).toBe('2');
    expect(during.json()).toMatchObject({ code: 'database_unavailable' });

    cluster('start');
    await eventually(async () => ((await call(`${base}/readyz`).catch(() => null))?.status === 200 ? true : undefined));
    expect((await create('after')).status).toBe(200);
    stop = true;
    await load;

    expect(server.child.exitCode).toBeNull(); // never restarted
    expect(outcomes.length).toBeGreaterThan(5);
    // Every answer was a success or the documented 503, and none hung: the pool gives up connecting
    // after 5 s (the bound leaves room for a loaded machine).
    expect(outcomes.every((o) => o.status === 200 || o.status === 503)).toBe(true);
    expect(Math.max(...outcomes.map((o) => o.ms))).toBeLessThan(20_000);
    expect(outcomes.some((o) => o.status === 503)).toBe(true);
    expect(outcomes.at(-1)!.status).toBe(200);
  }, 180_000);
});
