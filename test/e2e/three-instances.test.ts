import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { loadDevAuthMaterial, signDevToken } from '../../src/platform/tokens';
import { type Harness, startHarness } from '../helpers/harness';
import { freePort, listening, type Running, start } from '../helpers/process';
import { eventually, type Receiver, startReceiver, verify } from '../helpers/receiver';

// Three service processes on one Postgres database and one object store (a shared directory),
// as a scaled-out deployment runs them. Postgres only: the embedded PGlite is one process's.
const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

(onPostgres ? describe : describe.skip)('three instances on one database and one object store', () => {
  let h: Harness;
  let receiver: Receiver;
  let dataDir: string;
  const instances: { running: Running; base: string }[] = [];
  const adminId = 'three-instances-admin';

  beforeAll(async () => {
    h = await startHarness();
    // The harness only provides the database copy: its own workers stay out of it.
    await Promise.all([h.runtime.scheduler.stop(), h.runtime.runner.stop(), h.runtime.dispatcher.stop(), h.runtime.indexer.stop()]);
    receiver = await startReceiver();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-three-'));
    const env = {
      DATABASE_URL: h.runtime.config.databaseUrl as string,
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      BOOTSTRAP_ADMIN_USER_IDS: adminId,
      CAPABILITY_CACHE_MS: '500',
      AUTOMATION_TICK_CRON: '* * * * * *',
      AUTOMATION_POLL_INTERVAL_MS: '100',
      WEBHOOK_ALLOW_LOOPBACK: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '50',
      WEBHOOK_SECRETS_KEY: 'a-test-key-for-sealing-webhook-secrets-003',
      RATE_LIMIT_PER_MINUTE: '100000',
    };
    // One after another: the first writes the development signing material the others read.
    for (let i = 0; i < 3; i += 1) {
      const port = await freePort();
      const running = start({ ...env, PORT: String(port) });
      await listening(running);
      instances.push({ running, base: `http://127.0.0.1:${port}` });
    }
  }, 300_000);

  afterAll(async () => {
    for (const { running } of instances) {
      running.child.kill('SIGTERM');
      await running.exited;
    }
    await receiver?.close();
    await h?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }, 180_000);

  const token = async (userId: string) => signDevToken(await loadDevAuthMaterial(dataDir), userId);
  const call = (i: number, route: string, init: RequestInit & { json?: unknown } = {}) =>
    fetch(`${instances[i]!.base}${route}`, {
      ...init,
      headers: { ...(init.json !== undefined ? { 'Content-Type': 'application/json' } : {}), ...(init.headers as Record<string, string>) },
      body: init.json !== undefined ? JSON.stringify(init.json) : init.body,
    });

  test('tokens and sessions work on every instance; a file stored through one is read through another', async () => {
    const auth = { Authorization: `Bearer ${await token('roaming')}` };
    for (let i = 0; i < 3; i += 1) expect((await call(i, '/api/v1/notes', { headers: auth })).status).toBe(200);
    const started = await call(0, '/auth/session', { method: 'POST', headers: auth });
    expect(started.status).toBe(200);
    const cookie = (started.headers.get('set-cookie') ?? '').split(';')[0]!;
    for (const i of [1, 2]) {
      const res = await call(i, '/api/v1/notes', { headers: { Cookie: cookie } });
      expect(res.status).toBe(200);
    }

    const created = await call(0, '/api/v1/files', {
      method: 'POST',
      headers: auth,
      json: { name: 'hello.txt', mimeType: 'text/plain', sizeBytes: 5 },
    });
    const fileId = ((await created.json()) as { file: { fileId: string } }).file.fileId;
    const link = (await (await call(0, '/api/v1/files/upload-url', { method: 'POST', headers: auth, json: { fileId } })).json()) as {
      upload: { url: string };
    };
    const put = await call(1, new URL(link.upload.url, 'http://x').pathname + new URL(link.upload.url, 'http://x').search, {
      method: 'PUT',
      headers: { 'Content-Type': 'text/plain', 'Content-Length': '5' },
      body: 'hello',
    });
    expect(put.status).toBe(200);
    const read = (await (await call(2, `/api/v1/files?fileId=${fileId}`, { headers: auth })).json()) as { file: { contentUrl: string } };
    const content = await call(2, read.file.contentUrl);
    expect(content.status).toBe(200);
    expect(await content.text()).toBe('hello');
  });

  test('a capability switched through one instance is seen by all within the cache interval', async () => {
    const admin = { Authorization: `Bearer ${await token(adminId)}` };
    const user = { Authorization: `Bearer ${await token('switch-watcher')}` };
    const off = await call(0, '/api/v1/admin/capabilities', { method: 'PATCH', headers: admin, json: { automations: false } });
    expect(off.status).toBe(200);
    // Each instance's cache (500 ms) runs out and it reads the switch; how soon depends on the machine.
    for (const i of [0, 1, 2]) {
      await eventually(async () => ((await call(i, '/api/v1/automations', { headers: user })).status === 403 ? true : undefined));
    }
    await call(1, '/api/v1/admin/capabilities', { method: 'PATCH', headers: admin, json: { automations: true } });
    for (const i of [0, 1, 2]) {
      await eventually(async () => ((await call(i, '/api/v1/automations', { headers: user })).status === 200 ? true : undefined));
    }
  });

  test('each cron slot runs once and each webhook event is delivered once, whichever instance produced it', async () => {
    const userId = 'three-instances-owner';
    const auth = { Authorization: `Bearer ${await token(userId)}` };
    const subscribed = await call(0, '/api/v1/webhooks', {
      method: 'POST',
      headers: auth,
      json: { url: receiver.url, events: ['chat.completed', 'automation.finished'] },
    });
    expect(subscribed.status).toBe(200);
    const { secret } = (await subscribed.json()) as { secret: string };

    const automation = await call(1, '/api/v1/automations', {
      method: 'POST',
      headers: auth,
      json: { name: 'Every minute', prompt: 'Tick.', schedule: { cron: '* * * * *', timezone: 'UTC' } },
    });
    const { automationId, nextRunAt } = ((await automation.json()) as { automation: { automationId: string; nextRunAt: number } })
      .automation;

    // Nine replies, three through each instance.
    const conversation = (await (await call(2, '/api/v1/conversations', { method: 'POST', headers: auth, json: {} })).json()) as {
      conversation: { conversationId: string };
    };
    for (let n = 0; n < 9; n += 1) {
      const res = await call(n % 3, '/api/v1/conversations/messages', {
        method: 'POST',
        headers: auth,
        json: { conversationId: conversation.conversation.conversationId, content: `Message ${n}` },
      });
      expect(res.status).toBe(200);
    }

    // Every instance ticks each second; wait for the first slot and a few ticks past it.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, nextRunAt - Date.now()) + 3000));
    // The automation goes on firing each minute: its runs are those finished once it is switched off.
    await eventually(async () => {
      const rows = await sql<{ status: string }>`select status from automation_runs where automation_id = ${automationId}`.execute(
        h.runtime.database.db,
      );
      return rows.rows.some((r) => r.status === 'succeeded') ? true : undefined;
    });
    await h.runtime.database.db.updateTable('automations').set({ enabled: false }).where('id', '=', automationId).execute();
    const runs = await eventually(async () => {
      const rows = await sql<{ id: string; scheduled_for: Date; status: string }>`
        select id, scheduled_for, status from automation_runs where automation_id = ${automationId}`.execute(h.runtime.database.db);
      return rows.rows.every((r) => r.status === 'succeeded') ? rows.rows : undefined;
    });
    const slots = runs.map((r) => r.scheduled_for.getTime());
    expect(slots[0]).toBe(nextRunAt);
    expect(new Set(slots).size).toBe(slots.length); // never one slot twice

    // Once no delivery is pending, nothing more is sent: then the receiver has seen all there is.
    await eventually(async () => {
      const pending = await sql<{ n: number }>`
        select count(*)::int as n from webhook_deliveries where owner_user_id = ${userId} and status = 'pending'`.execute(
        h.runtime.database.db,
      );
      const verified = receiver.received.map((r) => verify(secret, r));
      return pending.rows[0]!.n === 0 &&
        verified.filter((e) => e.type === 'chat.completed').length >= 9 &&
        verified.filter((e) => e.type === 'automation.finished').length >= runs.length
        ? true
        : undefined;
    });
    const events = receiver.received.map((r) => verify(secret, r));
    const ids = events.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(events.filter((e) => e.type === 'chat.completed')).toHaveLength(9);
    expect(
      events
        .filter((e) => e.type === 'automation.finished')
        .map((e) => e.data.runId)
        .sort(),
    ).toEqual(runs.map((r) => r.id).sort());
  }, 300_000);
});
