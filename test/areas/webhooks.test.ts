import { sql } from 'kysely';
import { describeCrudContract } from '../helpers/crud-contract';
import { useHarnessWith } from '../helpers/harness';
import { emit, eventually, type Receiver, SAMPLE_DATA, startReceiver, subscribe, verify } from '../helpers/receiver';

// Short schedules: 8 attempts over about 2.3 s (one long gap shows fresh timestamps per attempt).
// The longest request timeout: an attempt that times out is retried, and the receiver, which did
// get it, sees the event twice (at-least-once delivery), so the counts below hold only if no
// answer is late. The timeout itself is tested on its own harness, with a receiver that never answers.
const env = () => ({
  WEBHOOK_ALLOW_LOOPBACK: 'true',
  WEBHOOK_RETRY_SCHEDULE: '20ms,1100ms,20ms,20ms,20ms,1100ms,20ms',
  WEBHOOK_TIMEOUT_MS: '60000',
  WEBHOOK_POLL_INTERVAL_MS: '20',
  WEBHOOK_DISABLE_AFTER: '1h',
});
const ctx = useHarnessWith(env, 'alice', 'bob');

type Delivery = {
  deliveryId: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  status: string;
  attemptCount: number;
  nextAttemptAt: number | null;
  attempts: {
    attempt: number;
    attemptedAt: number;
    outcome: string;
    responseStatus: number | null;
    responseBody: string | null;
    error: string | null;
  }[];
};

const receivers: Receiver[] = [];
async function receiver(answer?: Receiver['answer']): Promise<Receiver> {
  const r = await startReceiver(answer);
  receivers.push(r);
  return r;
}
afterAll(() => Promise.all(receivers.map((r) => r.close())));

async function deliveries(user = ctx.alice, query: Record<string, string> = {}): Promise<Delivery[]> {
  const res = await ctx.h
    .http()
    .get('/api/v1/webhooks/deliveries')
    .query({ limit: 200, ...query })
    .set(user.auth);
  expect(res.status).toBe(200);
  return res.body.deliveries;
}

async function deliveryOf(eventId: string, user = ctx.alice): Promise<Delivery | undefined> {
  return (await deliveries(user)).find((d) => d.eventId === eventId);
}

/** Waits until the event's delivery has finished (succeeded or failed). */
function finished(eventId: string, user = ctx.alice): Promise<Delivery> {
  return eventually(async () => {
    const delivery = await deliveryOf(eventId, user);
    return delivery && delivery.status !== 'pending' ? delivery : undefined;
  });
}

async function subscription(id: string, user = ctx.alice) {
  const res = await ctx.h.http().get('/api/v1/webhooks').query({ subscriptionId: id }).set(user.auth);
  expect(res.status).toBe(200);
  return res.body.subscription;
}

describe('webhook subscriptions', () => {
  test('the secret is shown once, at creation, and stored sealed', async () => {
    const created = await subscribe(ctx.h, ctx.alice, 'http://127.0.0.1:9/secret-check', ['chat.completed', 'automation.failed']);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(created.secret.slice(6), 'base64')).toHaveLength(32);
    expect(created.subscription).toMatchObject({
      events: ['automation.failed', 'chat.completed'],
      enabled: true,
      status: 'active',
      disabledReason: null,
    });
    const read = await ctx.h
      .http()
      .get('/api/v1/webhooks')
      .query({ subscriptionId: created.subscription.subscriptionId })
      .set(ctx.alice.auth);
    const list = await ctx.h.http().get('/api/v1/webhooks').set(ctx.alice.auth);
    for (const body of [read.body, list.body]) expect(JSON.stringify(body)).not.toContain(created.secret.slice(6));
    const row = await ctx.h.runtime.database.db
      .selectFrom('webhook_subscriptions')
      .select('secret')
      .where('id', '=', created.subscription.subscriptionId)
      .executeTakeFirstOrThrow();
    expect(row.secret).not.toContain(created.secret.slice(6));
  });

  test('a URL is subscribed once per user; another user may subscribe it too', async () => {
    const url = 'http://127.0.0.1:9/once';
    await subscribe(ctx.h, ctx.alice, url);
    const again = await ctx.h
      .http()
      .post('/api/v1/webhooks')
      .set(ctx.alice.auth)
      .send({ url, events: ['chat.failed'] });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('conflict');
    expect(
      (
        await ctx.h
          .http()
          .post('/api/v1/webhooks')
          .set(ctx.bob.auth)
          .send({ url, events: ['chat.failed'] })
      ).status,
    ).toBe(200);
  });

  test('a user has at most 25 subscriptions', async () => {
    const user = await ctx.h.newUser('many');
    for (let i = 0; i < 25; i += 1) await subscribe(ctx.h, user, `http://127.0.0.1:9/many-${i}`);
    const res = await ctx.h
      .http()
      .post('/api/v1/webhooks')
      .set(user.auth)
      .send({ url: 'http://127.0.0.1:9/many-25', events: ['chat.failed'] });
    expect(res.status).toBe(409);
    expect((await ctx.h.http().get('/api/v1/webhooks').query({ limit: 200 }).set(user.auth)).body.subscriptions).toHaveLength(25);
  });

  test('URLs that are not http(s), carry credentials or a fragment are refused', async () => {
    for (const url of [
      'ftp://127.0.0.1/x',
      'http://user:pass@127.0.0.1:9/x',
      'http://127.0.0.1:9/x#frag',
      'not a url',
      'https://8.8.8.8:8443/x',
      // Not a URI (`format: uri`): white space must be percent-encoded.
      'http://127.0.0.1:9/a b',
    ]) {
      const res = await ctx.h
        .http()
        .post('/api/v1/webhooks')
        .set(ctx.alice.auth)
        .send({ url, events: ['chat.completed'] });
      expect(res.status).toBe(400);
      expect(res.body.details[0].path).toBe('/body/url');
    }
  });
});

describe('webhook subscriptions: the collection contract', () => {
  describeCrudContract(
    {
      path: '/api/v1/webhooks',
      idField: 'subscriptionId',
      one: 'subscription',
      many: 'subscriptions',
      projectScoped: false,
      create: (n) => ({ url: `http://127.0.0.1:9/contract-${n}`, events: ['chat.completed'], description: 'contract' }),
      update: { description: 'changed', events: ['automation.failed'] },
      invalidCreates: [
        {},
        { url: 'http://127.0.0.1:9/no-events' },
        { url: 'http://127.0.0.1:9/empty-events', events: [] },
        { url: '', events: ['chat.completed'] },
        { url: 'http://127.0.0.1:9/bad-kind', events: ['chat.started'] },
        { url: 'http://127.0.0.1:9/long', events: ['chat.completed'], description: 'x'.repeat(501) },
        { url: 'http://10.0.0.1/hook', events: ['chat.completed'] },
        { url: 'http://127.0.0.1:9/dup', events: ['chat.completed', 'chat.completed'] },
      ],
      invalidUpdates: [
        { events: [] },
        { description: 'x'.repeat(501) },
        { url: '' },
        { omitId: true },
        { url: 'http://169.254.169.254/latest/meta-data' },
        { enabled: 'yes' },
        { subscriptionId: '' },
      ],
    },
    () => ctx.h,
  );
});

describe('delivery', () => {
  test('each event goes to the subscriptions that selected it, signed per Standard Webhooks', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver();
    const chat = await subscribe(ctx.h, me, `${r.url}/chat`, ['chat.completed']);
    const automations = await subscribe(ctx.h, me, `${r.url}/automations`, ['automation.finished', 'automation.failed']);
    await subscribe(ctx.h, me, `${r.url}/off`, ['chat.completed'], { enabled: false });
    await subscribe(ctx.h, ctx.bob, `${r.url}/bob`, ['chat.completed']);
    // The delivery log's response validator (tests only) compiles on its first use and blocks the
    // process meanwhile; on a loaded machine longer than the attempts' 500 ms timeout.
    await deliveries(me);

    const chatEvent = await emit(ctx.h, me.userId, 'chat.completed', { conversationId: 'c1' });
    const runEvent = await emit(ctx.h, me.userId, 'automation.finished', { runId: 'r1' });
    await finished(chatEvent as string, me);
    await finished(runEvent as string, me);

    const byPath = (p: string) => r.received.filter((q) => q.path === new URL(`${r.url}${p}`).pathname);
    expect(byPath('/chat')).toHaveLength(1);
    expect(byPath('/automations')).toHaveLength(1);
    expect(byPath('/off')).toHaveLength(0);
    expect(byPath('/bob')).toHaveLength(0);
    const chatPayload = verify(chat.secret, byPath('/chat')[0]!);
    expect(chatPayload).toEqual({
      id: chatEvent,
      type: 'chat.completed',
      createdAt: expect.any(Number),
      data: { ...SAMPLE_DATA['chat.completed'], conversationId: 'c1' },
    });
    expect(byPath('/chat')[0]!.headers['webhook-id']).toBe(chatEvent);
    expect(verify(automations.secret, byPath('/automations')[0]!)).toMatchObject({ id: runEvent, type: 'automation.finished' });
    expect(() => verify(automations.secret, byPath('/chat')[0]!)).toThrow();
    const delivery = (await deliveryOf(chatEvent as string, me))!;
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1, nextAttemptAt: null, eventType: 'chat.completed' });
    expect(delivery.attempts[0]).toMatchObject({ attempt: 1, outcome: 'succeeded', responseStatus: 200, error: null });
  });

  test('an event is written with the transaction that reports it: a rollback sends nothing', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver();
    await subscribe(ctx.h, me, r.url, ['chat.failed']);
    const db = ctx.h.runtime.database.db;
    let eventId: string | null = null;
    await expect(
      db.transaction().execute(async (trx) => {
        eventId = await ctx.h.runtime.services.webhooks.emitEvent(trx, 'chat.failed', me.userId, SAMPLE_DATA['chat.failed']);
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    expect(eventId).toMatch(/^msg_/);
    const stored = await sql<{ n: number }>`select count(*)::int as n from webhook_events where id = ${eventId}`.execute(db);
    expect(stored.rows[0]!.n).toBe(0);
    await ctx.h.runtime.dispatcher.runOnce();
    expect(r.received).toHaveLength(0);
  });

  test('a receiver failing three times gets the event once successfully, same webhook-id, fresh timestamps', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver((n) => (n < 3 ? { status: 500, body: `failure ${n + 1}` } : { status: 204 }));
    const { secret } = await subscribe(ctx.h, me, r.url, ['automation.failed']);
    const eventId = (await emit(ctx.h, me.userId, 'automation.failed', { runId: 'r2' })) as string;
    const delivery = await finished(eventId, me);

    expect(delivery.status).toBe('succeeded');
    expect(delivery.attempts.map((a) => [a.attempt, a.outcome, a.responseStatus])).toEqual([
      [1, 'failed', 500],
      [2, 'failed', 500],
      [3, 'failed', 500],
      [4, 'succeeded', 204],
    ]);
    expect(delivery.attempts[0]!.responseBody).toBe('failure 1');
    expect(r.received).toHaveLength(4);
    for (const request of r.received) expect(verify(secret, request).id).toBe(eventId);
    expect(new Set(r.received.map((q) => q.headers['webhook-id']))).toEqual(new Set([eventId]));
    const stamps = r.received.map((q) => Number(q.headers['webhook-timestamp']));
    stamps.forEach((stamp, i) => expect(stamp).toBe(Math.floor(delivery.attempts[i]!.attemptedAt / 1000)));
    expect(stamps[2]!).toBeGreaterThan(stamps[0]!); // 1.1 s apart: each attempt is signed anew
    expect((await subscription(delivery.subscriptionId, me)).status).toBe('active');
  });

  test('a receiver that always fails: the last attempt fails the delivery and the subscription shows failing', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver(() => ({ status: 503 }));
    const { subscription: sub } = await subscribe(ctx.h, me, r.url, ['chat.completed']);
    const eventId = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    const delivery = await finished(eventId, me);
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts).toHaveLength(8);
    expect(r.received).toHaveLength(8);
    const after = await subscription(sub.subscriptionId, me);
    expect(after).toMatchObject({ enabled: true, status: 'failing', failingSince: delivery.attempts[0]!.attemptedAt });
    const moved = await ctx.h
      .http()
      .patch('/api/v1/webhooks')
      .set(me.auth)
      .send({ subscriptionId: sub.subscriptionId, url: `${r.url}/v2` });
    expect(moved.body.subscription).toMatchObject({ status: 'active', failingSince: null, url: `${r.url}/v2` });
  });

  test('Retry-After postpones the next attempt', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver((n) => (n === 0 ? { status: 429, headers: { 'Retry-After': '30' } } : { status: 200 }));
    await subscribe(ctx.h, me, r.url, ['chat.completed']);
    const eventId = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    const pending = await eventually(async () => {
      const d = await deliveryOf(eventId, me);
      return d && d.attempts.length === 1 && d.nextAttemptAt ? d : undefined;
    });
    expect(pending.status).toBe('pending');
    expect(pending.nextAttemptAt! - pending.attempts[0]!.attemptedAt).toBeGreaterThanOrEqual(29_000);
  });

  test('redirects are not followed', async () => {
    const me = await ctx.h.newUser('me');
    const redirect = await receiver(() => ({ status: 302, headers: { Location: 'http://169.254.169.254/latest/meta-data' } }));
    await subscribe(ctx.h, me, redirect.url, ['chat.failed']);
    const eventId = (await emit(ctx.h, me.userId, 'chat.failed')) as string;
    const attempted = await eventually(async () => {
      const delivery = await deliveryOf(eventId, me);
      return delivery && delivery.attempts.length > 0 ? delivery : undefined;
    });
    expect(attempted.attempts[0]).toMatchObject({ outcome: 'failed', responseStatus: 302 });
    expect(attempted.attempts[0]!.error).toMatch(/^redirects are not followed \(Location: http:\/\/169\.254\.169\.254/);
    expect(redirect.received.length).toBeGreaterThanOrEqual(1);
  });

  describe('with a request timeout of half a second', () => {
    const timed = useHarnessWith(() => ({ ...env(), WEBHOOK_TIMEOUT_MS: '500' }), 'carol');

    test('a receiver that does not answer in time fails the attempt', async () => {
      const hang = await receiver(() => 'hang'); // never answers: only the timeout ends the attempt
      await subscribe(timed.h, timed.carol, hang.url, ['chat.failed']);
      const eventId = (await emit(timed.h, timed.carol.userId, 'chat.failed')) as string;
      const attempted = await eventually(async () => {
        const res = await timed.h.http().get('/api/v1/webhooks/deliveries').set(timed.carol.auth);
        const delivery = (res.body.deliveries as Delivery[]).find((d) => d.eventId === eventId);
        return delivery && delivery.attempts.length > 0 ? delivery : undefined;
      });
      expect(attempted.attempts[0]).toMatchObject({ outcome: 'failed', responseStatus: null, error: 'timeout after 500 ms' });
    });
  });

  test('410 Gone disables the subscription; PATCH enabled: true turns it back on', async () => {
    const me = await ctx.h.newUser('me');
    let gone = true;
    const r = await receiver(() => (gone ? { status: 410 } : { status: 200 }));
    const { subscription: sub } = await subscribe(ctx.h, me, r.url, ['chat.completed']);
    const eventId = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    const delivery = await finished(eventId, me);
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts).toHaveLength(1);
    expect(await subscription(sub.subscriptionId, me)).toMatchObject({
      enabled: false,
      status: 'disabled',
      disabledReason: 'endpoint_gone',
      disabledAt: expect.any(Number),
    });
    expect(await emit(ctx.h, me.userId, 'chat.completed')).toBeNull(); // nothing queued while disabled
    gone = false;
    const enabled = await ctx.h.http().patch('/api/v1/webhooks').set(me.auth).send({ subscriptionId: sub.subscriptionId, enabled: true });
    expect(enabled.body.subscription).toMatchObject({
      enabled: true,
      status: 'active',
      disabledReason: null,
      disabledAt: null,
      failingSince: null,
    });
    const next = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    expect((await finished(next, me)).status).toBe('succeeded');
  });

  test('failing for longer than the limit disables the subscription; pending deliveries resume once enabled', async () => {
    const me = await ctx.h.newUser('me');
    let failing = true;
    const r = await receiver(() => (failing ? { status: 500 } : { status: 200 }));
    const { subscription: sub } = await subscribe(ctx.h, me, r.url, ['automation.finished']);
    await ctx.h.runtime.database.db
      .updateTable('webhook_subscriptions')
      .set({ failing_since: new Date(Date.now() - 2 * 3_600_000) })
      .where('id', '=', sub.subscriptionId)
      .execute();
    const eventId = (await emit(ctx.h, me.userId, 'automation.finished')) as string;
    await eventually(async () => ((await subscription(sub.subscriptionId, me)).enabled ? undefined : true));
    expect(await subscription(sub.subscriptionId, me)).toMatchObject({ status: 'disabled', disabledReason: 'persistent_failure' });
    const held = (await deliveryOf(eventId, me))!;
    expect(held.status).toBe('pending');
    await ctx.h.runtime.dispatcher.runOnce();
    expect((await deliveryOf(eventId, me))!.attempts).toHaveLength(held.attempts.length); // not attempted while disabled
    failing = false;
    await ctx.h.http().patch('/api/v1/webhooks').set(me.auth).send({ subscriptionId: sub.subscriptionId, enabled: true });
    expect((await finished(eventId, me)).status).toBe('succeeded');
  });
});

describe('POST /api/v1/webhooks/rotate-secret', () => {
  test('signs with both secrets during the grace period, then with the new one only', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver();
    const { subscription: sub, secret: oldSecret } = await subscribe(ctx.h, me, r.url, ['chat.completed']);
    const rotated = await ctx.h
      .http()
      .post('/api/v1/webhooks/rotate-secret')
      .set(me.auth)
      .send({ subscriptionId: sub.subscriptionId, graceSeconds: 600 });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).not.toBe(oldSecret);
    expect(rotated.body.subscription.previousSecretExpiresAt).toBeGreaterThan(Date.now() + 590_000);
    const first = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    await finished(first, me);
    const during = r.received.at(-1)!;
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verify(rotated.body.secret, during).id).toBe(first);
    expect(verify(oldSecret, during).id).toBe(first);

    const immediate = await ctx.h
      .http()
      .post('/api/v1/webhooks/rotate-secret')
      .set(me.auth)
      .send({ subscriptionId: sub.subscriptionId, graceSeconds: 0 });
    expect(immediate.body.subscription.previousSecretExpiresAt).toBeNull();
    const second = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    await finished(second, me);
    const after = r.received.at(-1)!;
    expect(verify(immediate.body.secret, after).id).toBe(second);
    expect(() => verify(rotated.body.secret, after)).toThrow();
  });

  test('another user’s subscription is not found; bad input is a 400; the secret is unchanged', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver();
    const { subscription: sub, secret } = await subscribe(ctx.h, me, r.url, ['chat.completed']);
    expect(
      (await ctx.h.http().post('/api/v1/webhooks/rotate-secret').set(ctx.bob.auth).send({ subscriptionId: sub.subscriptionId })).status,
    ).toBe(404);
    for (const body of [
      {},
      { subscriptionId: sub.subscriptionId, graceSeconds: -1 },
      { subscriptionId: sub.subscriptionId, graceSeconds: 604801 },
      { subscriptionId: sub.subscriptionId, extra: 1 },
    ]) {
      const res = await ctx.h.http().post('/api/v1/webhooks/rotate-secret').set(me.auth).send(body);
      expect(res.status).toBe(400);
    }
    expect((await ctx.h.http().post('/api/v1/webhooks/rotate-secret').send({ subscriptionId: sub.subscriptionId })).status).toBe(401);
    const eventId = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    await finished(eventId, me);
    expect(verify(secret, r.received.at(-1)!).id).toBe(eventId);
  });
});

describe('POST /api/v1/webhooks/test', () => {
  test('sends a signed ping now and answers with its outcome, also to a disabled subscription', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver((n) => (n === 0 ? { status: 200, body: 'pong' } : { status: 500 }));
    const { subscription: sub, secret } = await subscribe(ctx.h, me, r.url, ['chat.completed'], { enabled: false });
    const ok = await ctx.h.http().post('/api/v1/webhooks/test').set(me.auth).send({ subscriptionId: sub.subscriptionId });
    expect(ok.status).toBe(200);
    expect(ok.body.delivery).toMatchObject({
      status: 'succeeded',
      eventType: 'webhook.test',
      attemptCount: 1,
      event: { type: 'webhook.test', data: { subscriptionId: sub.subscriptionId } },
    });
    expect(ok.body.delivery.attempts[0]).toMatchObject({ outcome: 'succeeded', responseStatus: 200, responseBody: 'pong' });
    expect(verify(secret, r.received[0]!)).toMatchObject({ type: 'webhook.test', id: ok.body.delivery.eventId });
    const failed = await ctx.h.http().post('/api/v1/webhooks/test').set(me.auth).send({ subscriptionId: sub.subscriptionId });
    expect(failed.body.delivery).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(await subscription(sub.subscriptionId, me)).toMatchObject({ failingSince: null, disabledReason: 'user' }); // tests do not count
  });

  test('another user’s subscription is not found; bad input is a 400; nothing is sent', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver();
    const { subscription: sub } = await subscribe(ctx.h, me, r.url, ['chat.completed']);
    expect((await ctx.h.http().post('/api/v1/webhooks/test').set(ctx.bob.auth).send({ subscriptionId: sub.subscriptionId })).status).toBe(
      404,
    );
    for (const body of [{}, { subscriptionId: '' }, { subscriptionId: sub.subscriptionId, event: 'chat.completed' }]) {
      expect((await ctx.h.http().post('/api/v1/webhooks/test').set(me.auth).send(body)).status).toBe(400);
    }
    expect(r.received).toHaveLength(0);
  });
});

describe('GET /api/v1/webhooks/deliveries', () => {
  test('filters by subscription and status, pages, and reads one', async () => {
    const ok = await receiver();
    const bad = await receiver(() => ({ status: 400 }));
    const user = await ctx.h.newUser('log');
    const good = await subscribe(ctx.h, user, ok.url, ['chat.completed']);
    await subscribe(ctx.h, user, bad.url, ['chat.completed']);
    const e1 = (await emit(ctx.h, user.userId, 'chat.completed')) as string;
    const e2 = (await emit(ctx.h, user.userId, 'chat.completed')) as string;
    await eventually(async () => ((await deliveries(user, { status: 'succeeded' })).length === 2 ? true : undefined));

    const mine = await deliveries(user, { subscriptionId: good.subscription.subscriptionId });
    expect(mine.map((d) => d.eventId)).toEqual([e2, e1]);
    const page1 = await ctx.h
      .http()
      .get('/api/v1/webhooks/deliveries')
      .query({ subscriptionId: good.subscription.subscriptionId, limit: 1 })
      .set(user.auth);
    expect(page1.body.deliveries).toHaveLength(1);
    const page2 = await ctx.h
      .http()
      .get('/api/v1/webhooks/deliveries')
      .query({ subscriptionId: good.subscription.subscriptionId, limit: 1, cursor: page1.body.nextCursor })
      .set(user.auth);
    expect(page2.body.deliveries[0].eventId).toBe(e1);
    expect(page2.body.nextCursor).toBeNull();
    const one = await ctx.h.http().get('/api/v1/webhooks/deliveries').query({ deliveryId: mine[0]!.deliveryId }).set(user.auth);
    expect(one.body.delivery).toEqual(mine[0]);
    expect((await deliveries(user, { status: 'succeeded' })).every((d) => d.subscriptionId === good.subscription.subscriptionId)).toBe(
      true,
    );
  });

  test('another user’s delivery or subscription is not found; bad input is a 400', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver();
    const { subscription: sub } = await subscribe(ctx.h, me, r.url, ['chat.completed']);
    const eventId = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    const delivery = await finished(eventId, me);
    expect(
      (await ctx.h.http().get('/api/v1/webhooks/deliveries').query({ deliveryId: delivery.deliveryId }).set(ctx.bob.auth)).status,
    ).toBe(404);
    expect(
      (await ctx.h.http().get('/api/v1/webhooks/deliveries').query({ subscriptionId: sub.subscriptionId }).set(ctx.bob.auth)).status,
    ).toBe(404);
    expect((await deliveries(ctx.bob)).map((d) => d.deliveryId)).not.toContain(delivery.deliveryId);
    for (const query of [{ status: 'done' }, { limit: 0 }, { cursor: '!!' }, { other: 1 }]) {
      expect((await ctx.h.http().get('/api/v1/webhooks/deliveries').query(query).set(me.auth)).status).toBe(400);
    }
    expect((await ctx.h.http().get('/api/v1/webhooks/deliveries')).status).toBe(401);
  });

  test('deleting a subscription deletes its log; old finished deliveries are pruned', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver();
    const first = await subscribe(ctx.h, me, `${r.url}/a`, ['automation.finished']);
    await subscribe(ctx.h, me, `${r.url}/b`, ['automation.finished']);
    const eventId = (await emit(ctx.h, me.userId, 'automation.finished')) as string;
    await eventually(async () =>
      (await deliveries(me)).filter((d) => d.eventId === eventId && d.status === 'succeeded').length === 2 ? true : undefined,
    );
    await ctx.h.http().delete('/api/v1/webhooks').query({ subscriptionId: first.subscription.subscriptionId }).set(me.auth);
    const left = (await deliveries(me)).filter((d) => d.eventId === eventId);
    expect(left).toHaveLength(1);

    const db = ctx.h.runtime.database.db;
    await db
      .updateTable('webhook_deliveries')
      .set({ completed_at: new Date(Date.now() - 31 * 86_400_000) })
      .where('id', '=', left[0]!.deliveryId)
      .execute();
    await db
      .updateTable('webhook_events')
      .set({ created_at: new Date(Date.now() - 31 * 86_400_000) })
      .where('id', '=', eventId)
      .execute();
    await ctx.h.runtime.dispatcher.prune();
    expect((await deliveries(me)).filter((d) => d.eventId === eventId)).toHaveLength(0);
    const events = await sql<{ n: number }>`select count(*)::int as n from webhook_events where id = ${eventId}`.execute(db);
    expect(events.rows[0]!.n).toBe(0);
  });
});

describe('POST /api/v1/webhooks/deliveries/redeliver', () => {
  test('queues a finished delivery’s event again, with the same webhook-id', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver();
    const { secret } = await subscribe(ctx.h, me, r.url, ['chat.completed']);
    const eventId = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    const first = await finished(eventId, me);
    const res = await ctx.h.http().post('/api/v1/webhooks/deliveries/redeliver').set(me.auth).send({ deliveryId: first.deliveryId });
    expect(res.status).toBe(200);
    expect(res.body.delivery).toMatchObject({ eventId, status: 'pending', attemptCount: 0, attempts: [] });
    expect(res.body.delivery.deliveryId).not.toBe(first.deliveryId);
    await eventually(async () => (r.received.length === 2 ? true : undefined));
    expect(r.received.map((q) => verify(secret, q).id)).toEqual([eventId, eventId]);
  });

  test('a pending delivery or a disabled subscription is a 409; another user’s is not found; bad input is a 400', async () => {
    const me = await ctx.h.newUser('me');
    const r = await receiver(() => 'hang'); // held until the 409 is seen
    const { subscription: sub } = await subscribe(ctx.h, me, r.url, ['chat.completed']);
    const eventId = (await emit(ctx.h, me.userId, 'chat.completed')) as string;
    const pending = await eventually(() => deliveryOf(eventId, me));
    expect(
      (await ctx.h.http().post('/api/v1/webhooks/deliveries/redeliver').set(me.auth).send({ deliveryId: pending.deliveryId })).status,
    ).toBe(409);
    await eventually(() => (r.received.length > 0 ? true : undefined));
    r.release(200);
    const done = await finished(eventId, me);
    await ctx.h.http().patch('/api/v1/webhooks').set(me.auth).send({ subscriptionId: sub.subscriptionId, enabled: false });
    const disabled = await ctx.h.http().post('/api/v1/webhooks/deliveries/redeliver').set(me.auth).send({ deliveryId: done.deliveryId });
    expect(disabled.status).toBe(409);
    expect(disabled.body.error).toMatch(/disabled/);
    expect(
      (await ctx.h.http().post('/api/v1/webhooks/deliveries/redeliver').set(ctx.bob.auth).send({ deliveryId: done.deliveryId })).status,
    ).toBe(404);
    for (const body of [{}, { deliveryId: '' }, { deliveryId: done.deliveryId, now: true }]) {
      expect((await ctx.h.http().post('/api/v1/webhooks/deliveries/redeliver').set(me.auth).send(body)).status).toBe(400);
    }
    expect((await deliveries(me)).filter((d) => d.eventId === eventId)).toHaveLength(1);
  });
});
