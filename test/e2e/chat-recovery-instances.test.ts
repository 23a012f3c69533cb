import fs from 'node:fs';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type { Runtime } from '../../src/app';
import { createHttpServer } from '../../src/http/server';
import { anotherInstance, type Harness, startHarness, type TestUser } from '../helpers/harness';
import { type FakeModelServer, parseEvents, startFakeModel } from '../helpers/openai-server';
import { freePort, listening, type Running, start } from '../helpers/process';
import { eventually, type Receiver, startReceiver, subscribe, verify } from '../helpers/receiver';

const SECRETS_KEY = 'a-test-key-for-sealing-webhook-secrets-001';
const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

let model: FakeModelServer;
let receiver: Receiver;
beforeEach(async () => {
  // The model streams the start of a reply and never ends it.
  model = await startFakeModel(() => ({ kind: 'stall', chunks: ['Half a'] }));
  receiver = await startReceiver();
});
afterEach(async () => {
  await model.close();
  await receiver.close();
});

const env = () => ({
  MODEL_PROVIDER_BASE_URL: model.baseUrl,
  MODEL_PROVIDER_MODELS: 'test-model',
  CHAT_TIMEOUT_MS: '600000',
  WEBHOOK_ALLOW_LOOPBACK: 'true',
  WEBHOOK_POLL_INTERVAL_MS: '20',
  WEBHOOK_SECRETS_KEY: SECRETS_KEY,
});

/** Starts a streamed reply at `baseUrl` and leaves it open; resolves once the model was asked. */
async function startReply(baseUrl: string, user: TestUser, conversationId: string): Promise<http.ClientRequest> {
  const asked = model.requests.length;
  const body = JSON.stringify({ conversationId, content: 'Write the plan.', stream: true });
  const req = http.request(`${baseUrl}/api/v1/conversations/messages`, {
    method: 'POST',
    headers: { ...user.auth, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
  });
  req.on('error', () => undefined); // destroyed at the end of the test
  req.end(body);
  await eventually(() => (model.requests.length > asked ? true : undefined));
  return req;
}

async function reply(h: Harness, user: TestUser, conversationId: string) {
  const res = await h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(user.auth);
  expect(res.status).toBe(200);
  return (res.body.messages as Array<Record<string, unknown>>).find((m) => m.role === 'assistant');
}

async function setUp(h: Harness) {
  const user = await h.newUser('recovery');
  const { secret } = await subscribe(h, user, receiver.url, ['chat.failed']);
  const created = await h.http().post('/api/v1/conversations').set(user.auth).send({});
  expect(created.status).toBe(200);
  return { user, secret, conversationId: created.body.conversation.conversationId as string };
}

/** The one chat.failed delivered for `messageId`, once it arrived. */
async function delivered(secret: string, messageId: string) {
  const event = await eventually(() => receiver.received.map((r) => verify(secret, r)).find((e) => e.data.messageId === messageId), 30_000);
  expect(event.type).toBe('chat.failed');
  expect(event.data).toMatchObject({ messageId, errorCode: 'interrupted', model: 'test-model' });
  return event;
}

describe('chat replies whose instance stopped', () => {
  test('another instance fails the reply as interrupted after its lease and reports chat.failed once', async () => {
    const survivor = await startHarness({ ...env(), CHAT_REPLY_RECOVERY_INTERVAL_MS: '50' });
    let doomed: Runtime | null = null;
    let server: Server | null = null;
    let open: http.ClientRequest | null = null;
    try {
      // The instance that dies mid-reply: short leases, and it never sweeps itself.
      doomed = await anotherInstance(survivor, { ...env(), CHAT_REPLY_LEASE_MS: '3000', CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' });
      const app = doomed.app;
      server = await new Promise<Server>((resolve) => {
        const s = createHttpServer(app).listen(0, '127.0.0.1', () => resolve(s));
      });
      const { user, secret, conversationId } = await setUp(survivor);
      open = await startReply(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, user, conversationId);
      const pending = await reply(survivor, user, conversationId);
      expect(pending).toMatchObject({ status: 'generating', errorCode: null });

      // The instance stops without ending the reply: its leases are no longer renewed.
      await doomed.close();
      doomed = null;

      const failed = await eventually(async () => {
        const m = await reply(survivor, user, conversationId);
        return m?.status === 'failed' ? m : undefined;
      }, 30_000);
      expect(failed).toMatchObject({
        messageId: pending!.messageId,
        status: 'failed',
        errorCode: 'interrupted',
        errorMessage: expect.stringMatching(/stopped/),
      });
      await delivered(secret, pending!.messageId as string);

      // Ended once: a further sweep finds nothing, and the outbox holds one event for the reply.
      expect(await survivor.runtime.replies.runOnce()).toBe(0);
      const events = await sql<{
        n: number;
      }>`select count(*)::int as n from webhook_events where type = 'chat.failed' and position(${pending!.messageId as string} in body) > 0`.execute(
        survivor.runtime.database.db,
      );
      expect(events.rows[0]!.n).toBe(1);
    } finally {
      open?.destroy();
      if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
      await doomed?.close();
      await survivor.close();
    }
  }, 120_000);

  test('a restarted instance (a new runtime on the same database) fails the reply the stopped one left, and reports chat.failed', async () => {
    // The harness only holds the database (and delivers webhooks): its own sweep never runs, so
    // only the restarted instance can end the reply.
    const holder = await startHarness({ ...env(), CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' });
    await holder.runtime.replies.stop();
    let first: Runtime | null = null;
    let restarted: Runtime | null = null;
    let server: Server | null = null;
    let open: http.ClientRequest | null = null;
    try {
      first = await anotherInstance(holder, { ...env(), CHAT_REPLY_LEASE_MS: '3000', CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' });
      const app = first.app;
      server = await new Promise<Server>((resolve) => {
        const s = createHttpServer(app).listen(0, '127.0.0.1', () => resolve(s));
      });
      const { user, secret, conversationId } = await setUp(holder);
      open = await startReply(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, user, conversationId);
      const pending = await reply(holder, user, conversationId);
      expect(pending).toMatchObject({ status: 'generating', errorCode: null });

      // Stopped without ending its reply (its HTTP server is left open: the reply stays unanswered).
      await first.close();
      first = null;
      expect(await reply(holder, user, conversationId)).toMatchObject({ status: 'generating' });

      // Once its lease ran out (as by the time a crashed instance is back), the instance starts
      // again; its periodic sweep is far off, so its start-up pass is what ends the reply.
      await eventually(async () => {
        const row = await holder.runtime.database.db
          .selectFrom('messages')
          .select('locked_until')
          .where('id', '=', pending!.messageId as string)
          .executeTakeFirstOrThrow();
        return row.locked_until !== null && row.locked_until.getTime() < Date.now() ? true : undefined;
      }, 30_000);
      restarted = await anotherInstance(holder, { ...env(), CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' });
      const failed = await eventually(async () => {
        const m = await reply(holder, user, conversationId);
        return m?.status === 'failed' ? m : undefined;
      }, 30_000);
      expect(failed).toMatchObject({ messageId: pending!.messageId, errorCode: 'interrupted' });
      await delivered(secret, pending!.messageId as string);
      const events = await sql<{
        n: number;
      }>`select count(*)::int as n from webhook_events where type = 'chat.failed' and position(${pending!.messageId as string} in body) > 0`.execute(
        holder.runtime.database.db,
      );
      expect(events.rows[0]!.n).toBe(1);
    } finally {
      open?.destroy();
      if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
      await first?.close();
      await restarted?.close();
      await holder.close();
    }
  }, 120_000);

  test('an instance never fails a reply it is still writing, though its lease lapsed (as while the database was unreachable), and renews it', async () => {
    const h = await startHarness({ ...env(), CHAT_REPLY_LEASE_MS: '3000', CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' });
    let open: http.ClientRequest | null = null;
    try {
      const { user, conversationId } = await setUp(h);
      open = await startReply(h.baseUrl, user, conversationId);
      const pending = await eventually(async () => {
        const m = await reply(h, user, conversationId);
        return m?.status === 'generating' ? m : undefined;
      });
      const db = h.runtime.database.db;
      const lease = () =>
        db
          .selectFrom('messages')
          .select(['status', sql<boolean>`locked_until > now()`.as('held')])
          .where('id', '=', pending.messageId as string)
          .executeTakeFirstOrThrow();
      await db
        .updateTable('messages')
        .set({ locked_until: sql`now() - interval '1 minute'` })
        .where('id', '=', pending.messageId as string)
        .execute();
      expect(await lease()).toEqual({ status: 'generating', held: false });

      // Its own sweep passes it over; its next renewal holds it again.
      expect(await h.runtime.replies.runOnce()).toBe(0);
      expect(await lease()).toMatchObject({ status: 'generating' });
      await eventually(async () => ((await lease()).held ? true : undefined), 30_000);
      expect(await reply(h, user, conversationId)).toMatchObject({ messageId: pending.messageId, status: 'generating' });
    } finally {
      open?.destroy();
      await h.close();
    }
  }, 120_000);

  test('a shutdown that cannot wait fails the replies still streaming as interrupted', async () => {
    const h = await startHarness({ ...env(), CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' });
    let open: http.ClientRequest | null = null;
    try {
      const { user, secret, conversationId } = await setUp(h);
      open = await startReply(h.baseUrl, user, conversationId);
      expect(await h.runtime.interruptReplies()).toBe(1);
      const failed = await reply(h, user, conversationId);
      expect(failed).toMatchObject({ status: 'failed', errorCode: 'interrupted', content: '' });
      await delivered(secret, failed!.messageId as string);
    } finally {
      open?.destroy();
      await h.close();
    }
  }, 120_000);

  describe('as separate processes (Postgres: the embedded database belongs to one process)', () => {
    /**
     * A harness (the survivor) and a service process on its database, with a streamed reply open
     * at the process; `body` gets them once the reply is generating. Cleans up after `body`.
     */
    async function withReplyInProcess(
      survivorEnv: Record<string, string>,
      processEnv: Record<string, string>,
      body: (ctx: {
        survivor: Harness;
        proc: Running;
        user: TestUser;
        secret: string;
        conversationId: string;
        messageId: string;
      }) => Promise<void>,
    ) {
      const survivor = await startHarness({ ...env(), ...survivorEnv });
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-e2e-replies-'));
      let proc: Running | null = null;
      let open: http.ClientRequest | null = null;
      try {
        // The process signs with its own development key: give it the harness's, so the same tokens work.
        fs.cpSync(path.join(survivor.runtime.config.dataDir, 'dev-auth'), path.join(dataDir, 'dev-auth'), { recursive: true });
        const port = await freePort();
        const databaseUrl = survivor.runtime.config.databaseUrl as string;
        proc = start({
          ...env(),
          DATABASE_URL: databaseUrl,
          DATA_DIR: dataDir,
          PORT: String(port),
          RATE_LIMIT_PER_MINUTE: '1000000',
          ...processEnv,
        });
        await listening(proc);
        const { user, secret, conversationId } = await setUp(survivor);
        open = await startReply(`http://127.0.0.1:${port}`, user, conversationId);
        const pending = await reply(survivor, user, conversationId);
        expect(pending).toMatchObject({ status: 'generating' });
        await body({ survivor, proc, user, secret, conversationId, messageId: pending!.messageId as string });
      } finally {
        open?.destroy();
        if (proc && proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
        await survivor.close();
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    }

    (onPostgres ? test : test.skip)(
      'an instance killed mid-reply: another fails the reply as interrupted once its lease ran out',
      () =>
        withReplyInProcess(
          { CHAT_REPLY_RECOVERY_INTERVAL_MS: '50' },
          { CHAT_REPLY_LEASE_MS: '3000', CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' },
          async ({ survivor, proc, user, secret, conversationId, messageId }) => {
            proc.child.kill('SIGKILL');
            await proc.exited;
            const failed = await eventually(async () => {
              const m = await reply(survivor, user, conversationId);
              return m?.status === 'failed' ? m : undefined;
            }, 30_000);
            expect(failed).toMatchObject({ messageId, errorCode: 'interrupted' });
            await delivered(secret, messageId);
          },
        ),
      120_000,
    );

    (onPostgres ? test : test.skip)(
      'an instance killed mid-reply: a watcher of the reply on another instance ends with error interrupted',
      () =>
        withReplyInProcess(
          { CHAT_REPLY_RECOVERY_INTERVAL_MS: '50' },
          { CHAT_REPLY_LEASE_MS: '3000', CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' },
          async ({ survivor, proc, user, messageId }) => {
            const watched = new Promise<string>((resolve, reject) => {
              const req = http.get(
                `${survivor.baseUrl}/api/v1/conversations/messages/stream?messageId=${messageId}`,
                { headers: user.auth },
                (res) => {
                  let text = '';
                  res.on('data', (chunk: Buffer) => (text += chunk.toString()));
                  res.on('end', () => resolve(text));
                },
              );
              req.on('error', reject);
            });
            proc.child.kill('SIGKILL');
            await proc.exited;
            const events = parseEvents(await watched);
            expect(events.at(-1)).toMatchObject({
              event: 'error',
              data: { code: 'interrupted', message: { messageId, status: 'failed' } },
            });
          },
        ),
      120_000,
    );

    (onPostgres ? test : test.skip)(
      'a process killed mid-reply and started again fails the reply it left as interrupted',
      () =>
        withReplyInProcess(
          // The harness never sweeps: only the restarted process can end the reply.
          { CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' },
          { CHAT_REPLY_LEASE_MS: '3000', CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' },
          async ({ survivor, proc, user, secret, conversationId, messageId }) => {
            await survivor.runtime.replies.stop();
            proc.child.kill('SIGKILL');
            await proc.exited;
            const port = await freePort();
            const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-e2e-replies-again-'));
            const again = start({
              ...env(),
              DATABASE_URL: survivor.runtime.config.databaseUrl as string,
              DATA_DIR: dataDir,
              PORT: String(port),
              CHAT_REPLY_RECOVERY_INTERVAL_MS: '50',
            });
            try {
              await listening(again);
              const failed = await eventually(async () => {
                const m = await reply(survivor, user, conversationId);
                return m?.status === 'failed' ? m : undefined;
              }, 30_000);
              expect(failed).toMatchObject({ messageId, errorCode: 'interrupted' });
              await delivered(secret, messageId);
            } finally {
              again.child.kill('SIGTERM');
              await again.exited;
              fs.rmSync(dataDir, { recursive: true, force: true });
            }
          },
        ),
      120_000,
    );

    // No other instance sweeps, and the lease outlasts the test: only the stopping process can end the reply.
    (onPostgres ? test : test.skip)(
      'a shutdown outlasting SHUTDOWN_TIMEOUT_MS fails the replies still streaming before it exits',
      () =>
        withReplyInProcess(
          { CHAT_REPLY_RECOVERY_INTERVAL_MS: '600000' },
          { CHAT_REPLY_LEASE_MS: '600000', SHUTDOWN_TIMEOUT_MS: '500' },
          async ({ survivor, proc, user, secret, conversationId, messageId }) => {
            proc.child.kill('SIGTERM');
            expect(await proc.exited).toBe(1);
            expect(await reply(survivor, user, conversationId)).toMatchObject({ messageId, status: 'failed', errorCode: 'interrupted' });
            await delivered(secret, messageId);
          },
        ),
      120_000,
    );
  });
});
