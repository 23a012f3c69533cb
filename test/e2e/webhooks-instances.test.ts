import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { anotherInstance, startHarness } from '../helpers/harness';
import { freePort, listening, start } from '../helpers/process';
import { emit, eventually, type Receiver, SAMPLE_DATA, startReceiver, subscribe, verify } from '../helpers/receiver';

const SECRETS_KEY = 'a-test-key-for-sealing-webhook-secrets-001';
const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

describe('webhook delivery across instances', () => {
  let receiver: Receiver;
  afterEach(() => receiver?.close());

  test('two instances deliver 1,000 events, each exactly once', async () => {
    // Background polling off: the test drives both instances' workers side by side. A long request
    // timeout (the lease is that and 5 s) keeps a lease from lapsing while a loaded machine stalls
    // both instances: this test is about two instances never claiming the same delivery.
    const env = {
      WEBHOOK_ALLOW_LOOPBACK: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '60000',
      WEBHOOK_TIMEOUT_MS: '60000',
      WEBHOOK_SECRETS_KEY: SECRETS_KEY,
    };
    const a = await startHarness(env);
    const b = await anotherInstance(a, env);
    try {
      receiver = await startReceiver();
      const user = await a.newUser('scale');
      const { secret } = await subscribe(a, user, receiver.url, ['chat.completed']);
      const emitted: string[] = [];
      for (let batch = 0; batch < 100; batch += 1) {
        await a.runtime.database.db.transaction().execute(async (trx) => {
          for (let i = 0; i < 10; i += 1) {
            emitted.push(
              (await a.runtime.services.webhooks.emitEvent(trx, 'chat.completed', user.userId, {
                ...SAMPLE_DATA['chat.completed'],
                messageId: `m${batch * 10 + i}`,
              })) as string,
            );
          }
        });
      }
      const pending = async () =>
        (
          await sql<{ n: number }>`select count(*)::int as n from webhook_deliveries where status = 'pending'`.execute(
            a.runtime.database.db,
          )
        ).rows[0]!.n;
      while ((await pending()) > 0) await Promise.all([a.runtime.dispatcher.runOnce(), b.dispatcher.runOnce()]);
      await Promise.all([a.runtime.dispatcher.stop(), b.dispatcher.stop()]);

      const made = { a: a.runtime.dispatcher.attemptsMade, b: b.dispatcher.attemptsMade };
      expect(made.a + made.b).toBe(1000);
      expect(made.a).toBeGreaterThan(0);
      expect(made.b).toBeGreaterThan(0);
      expect(receiver.received).toHaveLength(1000);
      const ids = receiver.received.map((request) => verify(secret, request).id);
      expect(new Set(ids).size).toBe(1000);
      expect(new Set(ids)).toEqual(new Set(emitted));
      const states = await sql<{ status: string; attempt_count: number; n: number }>`
        select status, attempt_count, count(*)::int as n from webhook_deliveries where owner_user_id = ${user.userId}
        group by status, attempt_count`.execute(a.runtime.database.db);
      expect(states.rows).toEqual([{ status: 'succeeded', attempt_count: 1, n: 1000 }]);
    } finally {
      await b.close();
      await a.close();
    }
  }, 180_000);

  test('an attempt that lasts is kept by renewing its lease, and is delivered once only', async () => {
    // The lease is the request timeout and 5 s; the dispatcher renews it every quarter of that
    // while the attempt goes on. The receiver holds the request until the renewal is seen in the
    // database (the lease pushed beyond the one the claim set): without renewal that never happens
    // and the attempt runs into its timeout.
    const env = {
      WEBHOOK_ALLOW_LOOPBACK: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '20',
      WEBHOOK_TIMEOUT_MS: '30000',
      WEBHOOK_SECRETS_KEY: SECRETS_KEY,
    };
    const h = await startHarness(env);
    try {
      receiver = await startReceiver((n) => (n === 0 ? 'hang' : { status: 200 }));
      const user = await h.newUser('slow');
      const { secret } = await subscribe(h, user, receiver.url, ['chat.completed']);
      const eventId = await emit(h, user.userId, 'chat.completed');
      await eventually(() => (receiver.received.length > 0 ? true : undefined));
      const lease = () =>
        h.runtime.database.db
          .selectFrom('webhook_deliveries')
          .select(['lease_token', 'next_attempt_at', 'status', 'attempt_count'])
          .where('owner_user_id', '=', user.userId)
          .executeTakeFirstOrThrow();
      const claimed = await lease();
      expect(claimed.status).toBe('pending');
      const renewed = await eventually(async () => {
        const now = await lease();
        return now.next_attempt_at.getTime() > claimed.next_attempt_at.getTime() ? now : undefined;
      }, 170_000);
      expect(renewed.lease_token).toBe(claimed.lease_token);
      expect(receiver.received).toHaveLength(1);

      receiver.release(200);
      const done = await eventually(async () => {
        const now = await lease();
        return now.status === 'succeeded' ? now : undefined;
      });
      expect(done.attempt_count).toBe(1);
      await h.runtime.dispatcher.stop();
      expect(receiver.received).toHaveLength(1);
      expect(verify(secret, receiver.received[0]!).id).toBe(eventId);
    } finally {
      await h.close();
    }
  }, 180_000);

  (onPostgres ? test : test.skip)(
    'an instance killed mid-delivery: another redelivers after the lease, with the same webhook-id',
    async () => {
      const env = {
        WEBHOOK_ALLOW_LOOPBACK: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '20',
        WEBHOOK_TIMEOUT_MS: '5000',
        WEBHOOK_SECRETS_KEY: SECRETS_KEY,
      };
      const survivor = await startHarness(env);
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-e2e-webhooks-'));
      const doomed = start({
        ...env,
        DATABASE_URL: survivor.runtime.config.databaseUrl as string,
        DATA_DIR: dataDir,
        PORT: String(await freePort()),
      });
      try {
        await survivor.runtime.dispatcher.stop(); // only the doomed instance may take the first attempt
        await listening(doomed);
        receiver = await startReceiver((n) => (n === 0 ? 'hang' : { status: 200 }));
        const user = await survivor.newUser('killed');
        const { subscription, secret } = await subscribe(survivor, user, receiver.url, ['automation.finished']);
        const eventId = await emit(survivor, user.userId, 'automation.finished', { runId: 'r-kill' });

        await eventually(() => (receiver.received.length === 1 ? true : undefined));
        doomed.child.kill('SIGKILL');
        await doomed.exited;
        const killedAt = Date.now();
        survivor.runtime.dispatcher.start();

        await eventually(() => (receiver.received.length === 2 ? true : undefined));
        expect(receiver.received[1]!.at - killedAt).toBeGreaterThanOrEqual(3000); // not before the lease (10 s from the claim) ran out
        expect(receiver.received.map((request) => verify(secret, request).id)).toEqual([eventId, eventId]);
        expect(receiver.received[0]!.headers['webhook-id']).toBe(receiver.received[1]!.headers['webhook-id']);
        const log = await eventually(async () => {
          const res = await survivor
            .http()
            .get('/api/v1/webhooks/deliveries')
            .query({ subscriptionId: subscription.subscriptionId })
            .set(user.auth);
          return res.body.deliveries[0]?.status === 'succeeded' ? res.body.deliveries[0] : undefined;
        });
        expect(log.attempts.map((x: { outcome: string }) => x.outcome)).toEqual(['failed', 'succeeded']);
        expect(log.attempts[0].error).toMatch(/^interrupted/);
      } finally {
        if (doomed.child.exitCode === null && doomed.child.signalCode === null) doomed.child.kill('SIGKILL');
        await survivor.close();
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    },
    300_000,
  );
});
