import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { type Harness, startHarness, type TestUser } from '../helpers/harness';

/**
 * A real browser (headless Chromium) calls the service from pages on other origins: one listed in
 * ALLOWED_ORIGINS, which signs in with the session cookie and reads and writes notes, and one that
 * is not, whose calls the browser must refuse. The pages and the API are all on `localhost`
 * (different ports: different origins, the same site), so the SameSite=Lax cookie goes along.
 */

/** The Chromium to drive: CHROMIUM_BIN, or the first of the usual names on PATH. */
function findChromium(): string | null {
  if (process.env.CHROMIUM_BIN) return process.env.CHROMIUM_BIN;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    for (const name of ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome']) {
      const candidate = path.join(dir, name);
      if (dir && fs.existsSync(candidate)) return candidate;
    }
  }
  return null;
}

const chromium = findChromium();
const describeInBrowser = chromium ? describe : describe.skip;
if (!chromium) {
  console.warn(
    'SKIPPED the cross-origin browser test: no Chromium found (install it with `apt-get install -y chromium`, or set CHROMIUM_BIN).',
  );
}

interface PageServer {
  server: http.Server;
  origin: string;
  /** Resolves with what the page posted to /result. */
  result: Promise<Record<string, unknown>>;
}

/** Serves `page(origin)` at / and takes the page's results at POST /result, on its own loopback port. */
async function pageServer(page: (origin: string) => string): Promise<PageServer> {
  let deliver!: (value: Record<string, unknown>) => void;
  const result = new Promise<Record<string, unknown>>((resolve) => (deliver = resolve));
  let origin = '';
  const server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/result') {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        res.writeHead(204).end();
        deliver(JSON.parse(body) as Record<string, unknown>);
      });
      return;
    }
    if (req.url === '/' || req.url?.startsWith('/?')) {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(page(origin));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://localhost:${(server.address() as AddressInfo).port}`;
  return { server, origin, result };
}

/**
 * The page's script: each step's status and readable headers, or the error the fetch rejected
 * with; posted to its own origin's /result, then the browser goes on to `next` (if any).
 */
function pageHtml(api: string, token: string, title: string, next: string | null): string {
  const script = `
const api = ${JSON.stringify(api)};
const out = {};
async function step(name, run) {
  try { out[name] = await run(); } catch (error) { out[name] = { rejected: String(error) }; }
}
async function read(response) {
  const body = await response.json();
  return { status: response.status, requestId: response.headers.get('X-Request-Id'), rateLimitRemaining: response.headers.get('RateLimit-Remaining'), body };
}
(async () => {
  await step('session', async () => read(await fetch(api + '/auth/session', { method: 'POST', credentials: 'include', headers: { Authorization: 'Bearer ' + ${JSON.stringify(token)} } })));
  await step('create', async () => read(await fetch(api + '/api/v1/notes', {
    method: 'POST', credentials: 'include', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ title: ${JSON.stringify(title)}, content: '' }),
  })));
  await step('list', async () => read(await fetch(api + '/api/v1/notes', { credentials: 'include' })));
  await fetch('/result', { method: 'POST', body: JSON.stringify(out) });
  ${next ? `location.href = ${JSON.stringify(next)};` : ''}
})();
`;
  return `<!doctype html><html><head><meta charset="utf-8"><title>CORS</title></head><body><script>${script}</script></body></html>`;
}

/** Starts headless Chromium on `url` in a fresh profile; stopped with its whole process group. */
function launchChromium(binary: string, url: string, profile: string): ChildProcess {
  const args = [
    '--headless=new',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-dev-shm-usage',
    '--no-first-run',
    '--no-default-browser-check',
    '--no-proxy-server',
    '--disable-extensions',
    `--user-data-dir=${profile}`,
    url,
  ];
  return spawn(binary, args, { detached: true, stdio: 'ignore' });
}

function stopChromium(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    process.kill(-(child.pid as number), 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
  return exited;
}

/** Rejects after `ms` with what was being waited for (a generous bound: Chromium may start slowly). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no ${what} within ${ms / 1000} s`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

describeInBrowser(`CORS in a real browser (${chromium ?? 'no Chromium'})`, () => {
  let h: Harness;
  let alice: TestUser;
  let mallory: TestUser;
  let allowedPage: PageServer;
  let deniedPage: PageServer;
  let browser: ChildProcess | undefined;
  let profile: string;
  const tokens = { alice: '', mallory: '' };
  let api = '';

  beforeAll(async () => {
    allowedPage = await pageServer(() => pageHtml(api, tokens.alice, 'From the allowed origin', `${deniedPage.origin}/`));
    deniedPage = await pageServer(() => pageHtml(api, tokens.mallory, 'From the other origin', null));
    h = await startHarness({ ALLOWED_ORIGINS: allowedPage.origin });
    api = `http://localhost:${new URL(h.baseUrl).port}`;
    alice = await h.newUser('alice');
    mallory = await h.newUser('mallory');
    tokens.alice = alice.token;
    tokens.mallory = mallory.token;
    profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cors-chromium-'));
  });

  afterAll(async () => {
    if (browser) await stopChromium(browser);
    if (profile) fs.rmSync(profile, { recursive: true, force: true });
    await Promise.all(
      [allowedPage, deniedPage].filter(Boolean).map((page) => new Promise<void>((resolve) => page.server.close(() => resolve()))),
    );
    await h?.close();
  });

  test('the allowed origin signs in and reads and writes with the cookie; the other origin is refused', async () => {
    browser = launchChromium(chromium as string, `${allowedPage.origin}/`, profile);
    const exited = new Promise<never>((_, reject) =>
      browser!.once('exit', (code, signal) => reject(new Error(`Chromium exited early (${code ?? signal})`))),
    );
    exited.catch(() => undefined);

    const allowed = await within(Promise.race([allowedPage.result, exited]), 90_000, 'result from the allowed page');
    expect(allowed.session).toMatchObject({ status: 200, body: { session: { userId: alice.userId } } });
    // The POST went with the cookie alone (no Authorization) and passed the Origin check.
    expect(allowed.create).toMatchObject({ status: 200, body: { note: { title: 'From the allowed origin' } } });
    expect(allowed.list).toMatchObject({ status: 200, body: { notes: [{ title: 'From the allowed origin' }] } });
    for (const name of ['session', 'create', 'list']) {
      const step = allowed[name] as { requestId: string | null; rateLimitRemaining: string | null };
      expect(step.requestId).toMatch(/^[0-9a-f-]{36}$/);
    }
    expect((allowed.list as { rateLimitRemaining: string | null }).rateLimitRemaining).toMatch(/^\d+$/);

    // The browser refuses every call of the other origin: the preflights are denied, and the
    // simple GET (sent with the cookie, which is same-site) answers without CORS headers.
    const denied = await within(Promise.race([deniedPage.result, exited]), 90_000, 'result from the other page');
    for (const name of ['session', 'create', 'list']) {
      expect({ name, step: denied[name] }).toEqual({ name, step: { rejected: expect.stringMatching(/^TypeError: Failed to fetch/) } });
    }
    // Nothing was written for it, nor a session made for mallory.
    const theirs = await h.http().get('/api/v1/notes').set(mallory.auth);
    expect(theirs.body.notes).toEqual([]);
    const ours = await h.http().get('/api/v1/notes').set(alice.auth);
    expect(ours.body.notes.map((note: { title: string }) => note.title)).toEqual(['From the allowed origin']);
  }, 200_000);
});
