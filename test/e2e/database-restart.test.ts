import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import { loadDevAuthMaterial, signDevToken } from '../../src/platform/tokens';
import { type Behaviour, type FakeRequestBody, parseEvents, startFakeModel } from '../helpers/openai-server';
import { freePort, listening, type Running, start } from '../helpers/process';
import { eventually, startReceiver } from '../helpers/receiver';

/**
 * A request on a connection of its own (`agent: false`): while the database is down the service
 * answers the load's requests and may close their pooled connections, and a pooled client that
 * reuses one just then fails with "other side closed".
 */
function call(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; header(name: string): string | undefined; json(): unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: init.method ?? 'GET', headers: init.headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, header: (name) => res.headers[name] as string | undefined, json: () => JSON.parse(text) }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** A streamed answer on a connection of its own: its text so far, and when it ended (or was cut). */
function streamed(url: string, headers: Record<string, string>, body: string): { text: () => string; ended: Promise<void> } {
  let text = '';
  const ended = new Promise<void>((resolve) => {
    const req = http.request(url, { method: 'POST', headers, agent: false }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('close', () => resolve());
    });
    req.on('error', () => resolve());
    req.end(body);
  });
  return { text: () => text, ended };
}

// A private Postgres cluster (not the run's shared server, which other test files use at the
// same time) is stopped and started again under the service's feet. Postgres only: the
// embedded PGlite lives inside the service's process.
const bin = fs.existsSync('/usr/lib/postgresql')
  ? path.join('/usr/lib/postgresql', fs.readdirSync('/usr/lib/postgresql').sort().at(-1)!, 'bin')
  : '';
const runnable = process.env.TEST_DATABASE_URL !== undefined && bin !== '' && fs.existsSync(path.join(bin, 'initdb'));
// CI runs the suite on Postgres with the server's binaries installed: there, a skip would hide a broken setup.
if (process.env.CI && process.env.TEST_DATABASE_URL !== undefined && !runnable)
  throw new Error('the database restart test needs initdb and pg_ctl (/usr/lib/postgresql/*/bin)');

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
    pg('pg_ctl', [
      '-D',
      dir,
      '-w',
      '-l',
      path.join(dir, 'log'),
      ...(action === 'start' ? ['-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`] : ['-m', 'fast']),
      action,
    ]);

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

  /** Starts the private cluster on a new port (stopped first, with its service, when a test left them running). */
  async function freshCluster(): Promise<void> {
    server?.child.kill('SIGKILL');
    await server?.exited;
    try {
      cluster('stop');
    } catch {
      // not running
    }
    port = await freePort();
    cluster('start');
  }

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

  test('chat turns (streamed, and awaiting approval), webhook deliveries and an automation run in flight: the process lives, each ends, none is charged twice', async () => {
    await freshCluster();
    // The model answers the streamed and held turns and the run only when `answer` is called
    // (while the database is down); a tool call needing approval pauses the other turns.
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const behaviour = (body: FakeRequestBody): Behaviour => {
      const last = body.messages.at(-1);
      if (last?.role === 'tool') return { kind: 'reply', chunks: ['Noted', '.'], usage: { prompt: 20, completion: 4 } };
      const text = last?.content ?? '';
      if (text.startsWith('Note '))
        return {
          kind: 'tool-calls',
          calls: [{ id: `call_${text.slice(5)}`, name: 'notes_create', arguments: JSON.stringify({ title: text, content: 'Kept.' }) }],
        };
      return { kind: 'pause', chunks: ['Half '], until: answered, rest: ['done.'], usage: { prompt: 12, completion: 6 } };
    };
    const model = await startFakeModel((n) => behaviour(model.requests[n]!.body));
    // The receiver holds every delivery until it is released (while the database is down).
    let holding = true;
    const receiver = await startReceiver(() => (holding ? 'hang' : { status: 200 }));
    const db = new Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`, max: 2 });
    db.on('error', () => undefined); // its idle clients lose the server at the restart
    const rows = async <R>(text: string, values: unknown[] = []): Promise<R[]> => (await db.query(text, values)).rows as R[];
    try {
      const httpPort = await freePort();
      server = start({
        PORT: String(httpPort),
        HOST: '127.0.0.1',
        DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/postgres`,
        DATA_DIR: path.join(dir, 'service-load'),
        LOG_LEVEL: 'info',
        NODE_ENV: 'development',
        RATE_LIMIT_PER_MINUTE: '1000000',
        MODEL_PROVIDER_BASE_URL: model.baseUrl,
        MODEL_PROVIDER_MODELS: 'test-model:100:200',
        CHAT_TIMEOUT_MS: '120000',
        CHAT_REPLY_LEASE_MS: '15000',
        CHAT_REPLY_RECOVERY_INTERVAL_MS: '500',
        WEBHOOK_ALLOW_LOOPBACK: 'true',
        WEBHOOK_SECRETS_KEY: 'a-test-key-for-sealing-webhook-secrets-001',
        WEBHOOK_POLL_INTERVAL_MS: '100',
        WEBHOOK_TIMEOUT_MS: '60000',
        WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s',
        AUTOMATION_POLL_INTERVAL_MS: '100',
        AUTOMATION_RUN_TIMEOUT_MS: '120000',
      });
      await listening(server);
      const pid = server.child.pid;
      const base = `http://127.0.0.1:${httpPort}`;
      const material = await loadDevAuthMaterial(path.join(dir, 'service-load'));
      const users = await Promise.all(
        ['ann', 'ben', 'cid', 'dee'].map(async (name) => ({
          Authorization: `Bearer ${await signDevToken(material, `restart-${name}`)}`,
          'Content-Type': 'application/json',
        })),
      );
      const post = (headers: Record<string, string>, route: string, body: unknown) =>
        call(`${base}/api/v1/${route}`, { method: 'POST', headers, body: JSON.stringify(body) });
      const events = ['chat.completed', 'chat.failed', 'approval.requested', 'automation.finished', 'automation.failed'];
      for (const headers of users) expect((await post(headers, 'webhooks', { url: receiver.url, events })).status).toBe(200);
      const conversation = async (headers: Record<string, string>) => {
        const res = await post(headers, 'conversations', {});
        expect(res.status).toBe(200);
        return (res.json() as { conversation: { conversationId: string } }).conversation.conversationId;
      };
      const userOf = (i: number) => users[i % users.length]!;

      // Eight turns paused for the approval of a tool call (their approval.requested held at the receiver).
      const approvals: Array<{ headers: Record<string, string>; approvalId: string }> = [];
      for (let i = 0; i < 8; i += 1) {
        const res = await post(userOf(i), 'conversations/messages', {
          conversationId: await conversation(userOf(i)),
          content: `Note ${i}`,
        });
        expect(res.status).toBe(200);
        const reply = (res.json() as { reply: { status: string; parts: Array<{ type: string; approvalId?: string }> } }).reply;
        expect(reply.status).toBe('awaiting_approval');
        approvals.push({ headers: userOf(i), approvalId: reply.parts.find((p) => p.type === 'tool-call')!.approvalId! });
      }
      // Twelve streamed turns, half written; two whole-answer turns waiting for the model.
      const streams: Array<ReturnType<typeof streamed>> = [];
      for (let i = 0; i < 12; i += 1) {
        const headers = userOf(i);
        streams.push(
          streamed(
            `${base}/api/v1/conversations/messages`,
            { ...headers },
            JSON.stringify({ conversationId: await conversation(headers), content: `Stream ${i}`, stream: true }),
          ),
        );
      }
      const waiting: Array<Promise<{ status: number }>> = [];
      for (let i = 0; i < 2; i += 1)
        waiting.push(post(userOf(i), 'conversations/messages', { conversationId: await conversation(userOf(i)), content: `Wait ${i}` }));
      // An automation run waiting for the model.
      const created = await post(users[0]!, 'automations', { name: 'Restart summary', prompt: 'Summarize the restart.' });
      expect(created.status).toBe(200);
      const queued = await post(users[0]!, 'automations/run', {
        automationId: (created.json() as { automation: { automationId: string } }).automation.automationId,
      });
      expect(queued.status).toBe(200);
      const runId = (queued.json() as { run: { runId: string } }).run.runId;

      await eventually(() => (streams.every((s) => s.text().includes('Half ')) ? true : undefined));
      await eventually(() =>
        model.requests.some((r) => JSON.stringify(r.body.messages).includes('Summarize the restart.')) ? true : undefined,
      );
      await eventually(() =>
        model.requests.filter((r) => r.body.messages.at(-1)?.content?.startsWith('Wait ')).length === 2 ? true : undefined,
      );
      await eventually(() => (receiver.received.length >= approvals.length ? true : undefined));
      expect(await rows(`select status from automation_runs where id = $1`, [runId])).toEqual([{ status: 'running' }]);
      // No transaction is held open while the turns wait on the model.
      expect(
        await rows(
          `select query from pg_stat_activity where state like 'idle in transaction%' and now() - state_change > interval '2 seconds'`,
        ),
      ).toEqual([]);

      cluster('stop');
      expect((await call(`${base}/readyz`)).status).toBe(503);
      const during = await post(users[0]!, 'conversations', {});
      expect(during.status).toBe(503);
      expect(during.header('retry-after')).toBe('2');
      expect(during.json()).toMatchObject({ code: 'database_unavailable' });
      const decidedDuring = await post(approvals[0]!.headers, 'approvals/decide', {
        approvalId: approvals[0]!.approvalId,
        decision: 'approve',
      });
      expect(decidedDuring.status).toBe(503);
      expect(decidedDuring.json()).toMatchObject({ code: 'database_unavailable' });
      // The model and the receiver answer while the database is down: the turns, the run and the
      // deliveries have their outcomes and must keep them until it is back.
      answer();
      holding = false;
      receiver.release(200);
      await eventually(() => (streams.every((s) => s.text().includes('done.')) ? true : undefined));

      cluster('start');
      await eventually(async () => ((await call(`${base}/readyz`).catch(() => null))?.status === 200 ? true : undefined));
      for (const { headers, approvalId } of approvals) {
        const decided = await post(headers, 'approvals/decide', { approvalId, decision: 'approve' });
        expect(decided.status).toBe(200);
      }
      await Promise.all(streams.map((s) => s.ended));
      for (const s of streams) expect(parseEvents(s.text()).at(-1)?.event).toMatch(/^(done|error)$/);
      for (const res of await Promise.all(waiting)) expect(res.status).toBe(200);

      // Every turn ended (complete, or failed as interrupted), each once; the service's own
      // recovery is given its time (a lapsed lease, then a sweep).
      const replies = await eventually(async () => {
        const found = await rows<{ status: string; error_code: string | null }>(
          `select status, error_code from messages where role = 'assistant'`,
        );
        return found.length === 22 &&
          found.every((m) => m.status === 'complete' || (m.status === 'failed' && m.error_code === 'interrupted'))
          ? found
          : undefined;
      });
      expect(replies.filter((m) => m.status === 'complete').length).toBeGreaterThan(0);
      // The run ended; every delivery reached the receiver and is done (none left claimed or failed).
      await eventually(async () => {
        const [run] = await rows<{ status: string }>(`select status from automation_runs where id = $1`, [runId]);
        return run && ['succeeded', 'failed'].includes(run.status) ? run : undefined;
      });
      await eventually(async () => {
        const open = await rows(`select id from webhook_deliveries where status <> 'succeeded'`);
        return open.length === 0 ? true : undefined;
      });
      // Charged once: no action has two usage records, and each complete reply and ended run has its own.
      expect(
        await rows(`select kind, resource_id, count(*)::int as n from usage_records group by kind, resource_id having count(*) > 1`),
      ).toEqual([]);
      expect(
        await rows(
          `select id from messages m where role = 'assistant' and status = 'complete' and not exists (select 1 from usage_records u where u.resource_id = m.id)`,
        ),
      ).toEqual([]);
      expect(
        await rows(
          `select id from automation_runs r where status = 'succeeded' and not exists (select 1 from usage_records u where u.kind = 'automation.run' and u.resource_id = r.id)`,
        ),
      ).toEqual([]);

      expect(server.child.pid).toBe(pid);
      expect(server.child.exitCode).toBeNull(); // never ended, never restarted
      expect(server.child.signalCode).toBeNull();
      expect(server.output()).not.toMatch(/unhandled|uncaught/i);
    } finally {
      await db.end();
      await model.close();
      await receiver.close();
    }
  }, 300_000);
});
