import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { MAX_POSTING_CENTS } from '../../src/areas/budgets/service';
import { type TestUser, useHarnessWith, userNamed } from '../helpers/harness';
import { useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually } from '../helpers/receiver';
import { deliver, STRIPE_SECRET, stripeEvent, subscriptionObject } from '../helpers/stripe';

// Billing on with Stripe: a "pro" plan, and nothing included for users without one.
const rootId = `root-${randomUUID()}`;
const servers = useFakeModelAndReceiver();
const ctx = useHarnessWith(
  () => ({
    BOOTSTRAP_ADMIN_USER_IDS: rootId,
    CAPABILITY_BILLING: 'true',
    STRIPE_WEBHOOK_SECRET: STRIPE_SECRET,
    BILLING_PLANS: JSON.stringify({ pro: { priceIds: ['price_pro_monthly'], monthlyBudgetCents: 500, storage: '1gb', automations: 20 } }),
    ENTITLEMENT_MONTHLY_BUDGET_CENTS: '0',
    MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
    // 100 cents per million input tokens, 200 per million output tokens.
    MODEL_PROVIDER_MODELS: 'test-model:100:200',
    AUTOMATION_POLL_INTERVAL_MS: '60000',
    AUTOMATION_TICK_CRON: '0 0 0 1 1 *',
  }),
  'alice',
  'bob',
);
const db = () => ctx.h.runtime.database.db;

/** Each reply costs 1,000,000 × 100 + 500,000 × 200 millionths of a cent: 200 cents. */
beforeEach(() => {
  servers.model.behaviour = () => ({ kind: 'reply', chunks: ['Done.'], usage: { prompt: 1_000_000, completion: 500_000 } });
});

const admin = () => userNamed(ctx.h, rootId);
const adjust = async (userId: string, amountCents: number) =>
  ctx.h
    .http()
    .post('/api/v1/admin/usage')
    .set((await admin()).auth)
    .send({ userId, amountCents })
    .expect(200);
const subscription = async (user: TestUser) =>
  (await ctx.h.http().get('/api/v1/subscription').set(user.auth).expect(200)).body.subscription;
const count = async (table: 'billing_events' | 'billing_subscriptions' | 'ledger_entries' | 'messages' | 'automation_runs') =>
  Number((await sql<{ n: string }>`select count(*) as n from ${sql.table(table)}`.execute(db())).rows[0]!.n);
const snapshot = async () =>
  (
    await sql<{
      s: string;
    }>`select (select json_agg(t order by id) from billing_subscriptions t)::text || (select count(*) from billing_events)::text || (select json_agg(b order by user_id) from budgets b)::text as s`.execute(
      db(),
    )
  ).rows[0]!.s;

describe('inbound Stripe events', () => {
  test('a subscription event gives the user the plan, its entitlements and its period', async () => {
    const user = await ctx.h.newUser('subscriber');
    const before = await subscription(user);
    expect(before).toMatchObject({
      plan: 'free',
      status: 'none',
      provider: 'stripe',
      entitlements: { monthlyBudgetCents: 0, storageBytes: null, automations: null },
    });
    const object = subscriptionObject({ id: `sub_${randomUUID()}`, customer: `cus_${randomUUID()}`, userId: user.userId });
    const res = await deliver(ctx.h, JSON.stringify(stripeEvent('customer.subscription.created', object)));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true, duplicate: false, outcome: 'applied' });
    expect(await subscription(user)).toMatchObject({
      plan: 'pro',
      status: 'active',
      subscriptionId: object.id,
      currentPeriodStart: Date.UTC(2026, 10, 1),
      currentPeriodEnd: Date.UTC(2026, 11, 1),
      entitlements: { monthlyBudgetCents: 500, storageBytes: 1024 ** 3, automations: 20 },
    });
    // Another user sees only their own state.
    expect(await subscription(ctx.bob)).toMatchObject({ plan: 'free', subscriptionId: null });
  });

  test('the same signed event delivered twice at the same moment changes state once; both answers are 2xx', async () => {
    const user = await ctx.h.newUser('twice');
    const payment = {
      id: `pi_${randomUUID()}`,
      object: 'payment_intent',
      amount_received: 1500,
      currency: 'usd',
      metadata: { kind: 'top_up', userId: user.userId },
    };
    const payload = JSON.stringify(stripeEvent('payment_intent.succeeded', payment));
    const events = await count('billing_events');
    const answers = await Promise.all([deliver(ctx.h, payload), deliver(ctx.h, payload)]);
    expect(answers.map((r) => r.status)).toEqual([200, 200]);
    expect(answers.map((r) => r.body.duplicate).sort()).toEqual([false, true]);
    expect(await count('billing_events')).toBe(events + 1);
    const usage = await ctx.h
      .http()
      .get('/api/v1/admin/usage')
      .query({ userId: user.userId })
      .set((await admin()).auth)
      .expect(200);
    expect(usage.body.budget.balanceCents).toBe(1500);
    expect(usage.body.entries).toMatchObject([{ kind: 'top_up', amountCents: 1500, balanceAfterCents: 1500 }]);
    // And once more, later: still one change.
    expect((await deliver(ctx.h, payload)).body).toMatchObject({ received: true, duplicate: true });
    expect((await subscription(user)).usage.balanceCents).toBe(1500);
  });

  test('an older subscription.updated after subscription.deleted leaves it deleted; an older update never overwrites a newer one', async () => {
    const user = await ctx.h.newUser('cancel');
    const base = { id: `sub_${randomUUID()}`, customer: `cus_${randomUUID()}`, userId: user.userId };
    const t = Math.floor(Date.now() / 1000);
    await deliver(
      ctx.h,
      JSON.stringify(stripeEvent('customer.subscription.created', subscriptionObject(base), { created: t - 30 })),
    ).expect(200);
    const newer = await deliver(
      ctx.h,
      JSON.stringify(
        stripeEvent('customer.subscription.updated', subscriptionObject({ ...base, cancelAtPeriodEnd: true }), { created: t - 10 }),
      ),
    );
    expect(newer.body.outcome).toBe('applied');
    const older = await deliver(
      ctx.h,
      JSON.stringify(
        stripeEvent('customer.subscription.updated', subscriptionObject({ ...base, status: 'past_due' }), { created: t - 20 }),
      ),
    );
    expect(older.status).toBe(200);
    expect(older.body.outcome).toBe('stale');
    expect(await subscription(user)).toMatchObject({ status: 'active', cancelAtPeriodEnd: true });

    await deliver(
      ctx.h,
      JSON.stringify(stripeEvent('customer.subscription.deleted', subscriptionObject({ ...base, status: 'canceled' }), { created: t })),
    ).expect(200);
    const late = await deliver(
      ctx.h,
      JSON.stringify(stripeEvent('customer.subscription.updated', subscriptionObject(base), { created: t - 5 })),
    );
    expect(late.status).toBe(200);
    expect(late.body.outcome).toBe('stale');
    // Even one stamped later cannot revive a canceled subscription.
    await deliver(ctx.h, JSON.stringify(stripeEvent('customer.subscription.updated', subscriptionObject(base), { created: t + 5 }))).expect(
      200,
    );
    expect(await subscription(user)).toMatchObject({
      plan: 'free',
      status: 'canceled',
      subscriptionId: base.id,
      entitlements: { monthlyBudgetCents: 0 },
    });
  });

  test('a tampered body, the wrong secret, a stale or missing signature: 400 invalid_signature and no row changed', async () => {
    const user = await ctx.h.newUser('tamper');
    const payload = JSON.stringify(
      stripeEvent(
        'customer.subscription.created',
        subscriptionObject({ id: `sub_${randomUUID()}`, customer: `cus_${randomUUID()}`, userId: user.userId }),
      ),
    );
    const before = await snapshot();
    const good = (await import('stripe')).default.webhooks.generateTestHeaderString({ payload, secret: STRIPE_SECRET });
    const attempts = [
      deliver(ctx.h, payload.replace('"active"', '"trialing"'), { header: good }),
      deliver(ctx.h, payload, { secret: 'whsec_someone_else_entirely_0123456789' }),
      deliver(ctx.h, payload, { timestamp: Math.floor(Date.now() / 1000) - 301 }),
      deliver(ctx.h, payload, { timestamp: Math.floor(Date.now() / 1000) + 3600 }),
      deliver(ctx.h, payload, { header: 'nonsense' }),
      ctx.h.http().post('/webhooks/stripe').set('Content-Type', 'application/json').send(payload),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_signature', error: expect.stringContaining('Stripe-Signature') });
    }
    expect(await snapshot()).toBe(before);
    expect(await subscription(user)).toMatchObject({ plan: 'free', subscriptionId: null });
  });

  test('checkout links a customer to a user; invoices show on the subscription, forward only', async () => {
    const user = await ctx.h.newUser('checkout');
    const customer = `cus_${randomUUID()}`;
    const id = `sub_${randomUUID()}`;
    const t = Math.floor(Date.now() / 1000);
    // The subscription arrives first, without the user in its metadata.
    await deliver(
      ctx.h,
      JSON.stringify(stripeEvent('customer.subscription.created', subscriptionObject({ id, customer }), { created: t - 60 })),
    ).expect(200);
    expect(await subscription(user)).toMatchObject({ plan: 'free' });
    await deliver(
      ctx.h,
      JSON.stringify(
        stripeEvent('checkout.session.completed', {
          id: 'cs_1',
          object: 'checkout.session',
          customer,
          client_reference_id: user.userId,
          subscription: id,
        }),
      ),
    ).expect(200);
    expect(await subscription(user)).toMatchObject({ plan: 'pro', subscriptionId: id, latestInvoice: null });

    const invoice = (status: string, amount: number) => ({
      id: `in_${randomUUID()}`,
      object: 'invoice',
      status,
      amount_paid: amount,
      amount_due: amount,
      parent: { subscription_details: { subscription: id } },
    });
    await deliver(ctx.h, JSON.stringify(stripeEvent('invoice.paid', invoice('paid', 2000), { created: t - 10 }))).expect(200);
    const failedEarlier = await deliver(
      ctx.h,
      JSON.stringify(stripeEvent('invoice.payment_failed', invoice('open', 2000), { created: t - 20 })),
    );
    expect(failedEarlier.body.outcome).toBe('stale');
    expect((await subscription(user)).latestInvoice).toEqual({ status: 'paid', amountCents: 2000, at: (t - 10) * 1000 });
    // Events the service does not use are stored and acknowledged.
    const other = await deliver(ctx.h, JSON.stringify(stripeEvent('customer.created', { id: customer, object: 'customer' })));
    expect(other.body).toEqual({ received: true, duplicate: false, outcome: 'ignored' });
  });

  test('the route takes only signed JSON events of a sane size', async () => {
    const big = 'x'.repeat(600 * 1024);
    const res = await deliver(ctx.h, JSON.stringify(stripeEvent('customer.created', { id: 'cus_big', filler: big })));
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('payload_too_large');
  });
});

describe('Stripe events stamped in the same second, and malformed ones', () => {
  const permutations = <T>(items: T[]): T[][] =>
    items.length <= 1
      ? [items]
      : items.flatMap((item, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]));

  test('created (incomplete) and updated (active) of one second end active in either delivery order', async () => {
    const t = Math.floor(Date.now() / 1000);
    for (const order of [
      ['created', 'updated'],
      ['updated', 'created'],
    ]) {
      const user = await ctx.h.newUser(`same-second-${order[0]}`);
      const base = { id: `sub_${randomUUID()}`, customer: `cus_${randomUUID()}`, userId: user.userId };
      const events = {
        created: stripeEvent('customer.subscription.created', subscriptionObject({ ...base, status: 'incomplete' }), { created: t }),
        updated: stripeEvent('customer.subscription.updated', subscriptionObject({ ...base, status: 'active' }), {
          created: t,
          previous: { status: 'incomplete' },
        }),
      };
      const outcomes = [];
      for (const name of order)
        outcomes.push((await deliver(ctx.h, JSON.stringify(events[name as keyof typeof events])).expect(200)).body.outcome);
      expect(outcomes).toEqual(order[0] === 'created' ? ['applied', 'applied'] : ['applied', 'stale']);
      expect(await subscription(user)).toMatchObject({
        plan: 'pro',
        status: 'active',
        subscriptionId: base.id,
        entitlements: { monthlyBudgetCents: 500 },
      });
    }
  });

  test('a whole lifecycle stamped in one second ends at its last status in every delivery order', async () => {
    const t = Math.floor(Date.now() / 1000);
    // incomplete → trialing → active → past_due, each update naming the status it left.
    const steps: [string, string | null][] = [
      ['incomplete', null],
      ['trialing', 'incomplete'],
      ['active', 'trialing'],
      ['past_due', 'active'],
    ];
    for (const order of permutations(steps)) {
      const user = await ctx.h.newUser('lifecycle');
      const base = { id: `sub_${randomUUID()}`, customer: `cus_${randomUUID()}`, userId: user.userId };
      for (const [status, previous] of order) {
        const object = subscriptionObject({ ...base, status });
        const event =
          previous === null
            ? stripeEvent('customer.subscription.created', object, { created: t })
            : stripeEvent('customer.subscription.updated', object, { created: t, previous: { status: previous } });
        await deliver(ctx.h, JSON.stringify(event)).expect(200);
      }
      expect({ order: order.map(([status]) => status), status: (await subscription(user)).status }).toEqual({
        order: order.map(([status]) => status),
        status: 'past_due',
      });
    }
    // A cancellation wins whenever it arrives, even stamped before the state it ends.
    const user = await ctx.h.newUser('lifecycle-end');
    const base = { id: `sub_${randomUUID()}`, customer: `cus_${randomUUID()}`, userId: user.userId };
    await deliver(ctx.h, JSON.stringify(stripeEvent('customer.subscription.updated', subscriptionObject(base), { created: t }))).expect(
      200,
    );
    const ended = await deliver(
      ctx.h,
      JSON.stringify(stripeEvent('customer.subscription.deleted', subscriptionObject({ ...base, status: 'canceled' }), { created: t - 1 })),
    );
    expect(ended.body.outcome).toBe('applied');
    expect(await subscription(user)).toMatchObject({ plan: 'free', status: 'canceled' });
  });

  test('the top-up cap is the admin adjustment bound of the document', async () => {
    const document = (await ctx.h.http().get('/openapi.json').expect(200)).body;
    const bound = document.components.schemas.BudgetAdjustRequest.properties.amountCents;
    expect([bound.minimum, bound.maximum]).toEqual([-MAX_POSTING_CENTS, MAX_POSTING_CENTS]);
    const user = await ctx.h.newUser('top-up-cap');
    const payment = {
      id: `pi_${randomUUID()}`,
      object: 'payment_intent',
      amount_received: MAX_POSTING_CENTS,
      currency: 'usd',
      metadata: { kind: 'top_up', userId: user.userId },
    };
    expect((await deliver(ctx.h, JSON.stringify(stripeEvent('payment_intent.succeeded', payment))).expect(200)).body.outcome).toBe(
      'applied',
    );
    expect((await subscription(user)).usage.balanceCents).toBe(MAX_POSTING_CENTS);
  });

  test('signed but malformed events answer 400 invalid_request naming the field, and change nothing', async () => {
    const user = await ctx.h.newUser('malformed');
    const state = async () =>
      `${await snapshot()}|${await count('ledger_entries')}|${(await sql<{ n: string }>`select count(*) as n from billing_customers`.execute(db())).rows[0]!.n}`;
    const sub = (fields: Partial<Parameters<typeof subscriptionObject>[0]> = {}) =>
      subscriptionObject({ id: `sub_${randomUUID()}`, customer: `cus_${randomUUID()}`, userId: user.userId, ...fields });
    const topUp = (amount: unknown, fields: Record<string, unknown> = {}) =>
      stripeEvent('payment_intent.succeeded', {
        id: `pi_${randomUUID()}`,
        object: 'payment_intent',
        amount_received: amount,
        currency: 'usd',
        metadata: { kind: 'top_up', userId: user.userId },
        ...fields,
      });
    const created = stripeEvent('customer.subscription.created', sub());
    const forms: [string, unknown, string][] = [
      ['empty object', {}, '/id'],
      ['array', [], '/'],
      ['null', null, '/'],
      ['string', 'abc', '/'],
      ['created "abc"', { ...created, created: 'abc' }, '/created'],
      ['created 1e20', { ...created, created: 1e20 }, '/created'],
      ['created 1.5', { ...created, created: 1.5 }, '/created'],
      ['no data.object', { ...created, data: { object: [] } }, '/data/object'],
      ['NUL in the event id', { ...created, id: 'evt_\u0000x' }, '/id'],
      ['lone surrogate in the event id', { ...created, id: 'evt_\ud800x' }, '/id'],
      ['NUL in the type', { ...created, type: 'customer.\u0000' }, '/type'],
      ['an event id of 300 characters', { ...created, id: `evt_${'x'.repeat(296)}` }, '/id'],
      ['NUL in the subscription id', stripeEvent('customer.subscription.updated', sub({ id: 'sub_\u0000' })), '/data/object/id'],
      [
        'lone surrogate in the customer',
        stripeEvent('customer.subscription.created', sub({ customer: 'cus_\udc00' })),
        '/data/object/customer',
      ],
      [
        'NUL in metadata.userId',
        stripeEvent('customer.subscription.created', sub({ userId: `${user.userId}\u0000` })),
        '/data/object/metadata/userId',
      ],
      [
        'NUL in the price id',
        stripeEvent('customer.subscription.created', sub({ priceId: 'price_\u0000' })),
        '/data/object/items/data/0/price/id',
      ],
      ['NUL in the status', stripeEvent('customer.subscription.created', sub({ status: 'active\u0000' })), '/data/object/status'],
      [
        'period end "abc"',
        stripeEvent('customer.subscription.created', { ...sub(), current_period_end: 'abc' }),
        '/data/object/current_period_end',
      ],
      [
        'period start 1e20',
        stripeEvent('customer.subscription.created', sub({ start: 1e20 })),
        '/data/object/items/data/0/current_period_start',
      ],
      [
        'NUL in the checkout customer',
        stripeEvent('checkout.session.completed', { id: 'cs_1', customer: 'cus_\u0000', client_reference_id: user.userId }),
        '/data/object/customer',
      ],
      [
        'NUL in client_reference_id',
        stripeEvent('checkout.session.completed', { id: 'cs_1', customer: `cus_${randomUUID()}`, client_reference_id: '\u0000' }),
        '/data/object/client_reference_id',
      ],
      [
        'invoice amount 1.5',
        stripeEvent('invoice.paid', { id: 'in_1', amount_paid: 1.5, subscription: 'sub_x' }),
        '/data/object/amount_paid',
      ],
      [
        'NUL in the invoice subscription',
        stripeEvent('invoice.paid', { id: 'in_1', amount_paid: 100, subscription: 'sub_\u0000' }),
        '/data/object/subscription',
      ],
      ['top-up of 1e20', topUp(1e20), '/data/object/amount_received'],
      ['top-up of 1.5', topUp(1.5), '/data/object/amount_received'],
      ['top-up of 2^53', topUp(2 ** 53), '/data/object/amount_received'],
      ['top-up over the cap', topUp(100_000_001), '/data/object/amount_received'],
      ['negative top-up', topUp(-5), '/data/object/amount_received'],
      ['top-up amount "5"', topUp('5'), '/data/object/amount_received'],
      ['NUL in the payment id', topUp(100, { id: 'pi_\u0000' }), '/data/object/id'],
      ['lone surrogate in the top-up user', topUp(100, { metadata: { kind: 'top_up', userId: '\ud83d' } }), '/data/object/metadata/userId'],
    ];
    const before = await state();
    for (const [name, event, field] of forms) {
      const payload = JSON.stringify(event);
      const res = await deliver(ctx.h, payload);
      expect({ name, status: res.status, code: res.body.code, paths: res.body.details?.map((d: { path: string }) => d.path) }).toEqual({
        name,
        status: 400,
        code: 'invalid_request',
        paths: expect.arrayContaining([field]),
      });
      expect(res.body.error).toEqual(expect.stringContaining('Stripe event'));
    }
    expect(await state()).toBe(before);
    expect(await subscription(user)).toMatchObject({ plan: 'free', subscriptionId: null, usage: { balanceCents: 0 } });
  });
});

describe('budgets enforced on charged actions', () => {
  // Titled, so that only the replies are charged (an untitled conversation's model-written title is charged too).
  async function conversation(user: TestUser): Promise<string> {
    return (await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({ title: 'Budget' }).expect(200)).body.conversation
      .conversationId;
  }
  const chat = (user: TestUser, conversationId: string) =>
    ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send({ conversationId, content: 'Hello' });

  test('an exhausted budget answers 402 on chat and automation run and changes nothing; an admin adjustment restores access', async () => {
    const user = await ctx.h.newUser('spender');
    const conversationId = await conversation(user);
    const automationId = (
      await ctx.h.http().post('/api/v1/automations').set(user.auth).send({ name: 'Daily', prompt: 'Summarize.' }).expect(200)
    ).body.automation.automationId;
    const [messages, runs] = [await count('messages'), await count('automation_runs')];

    const refused = await chat(user, conversationId);
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({ code: 'budget_exhausted', periodEnd: expect.any(Number) });
    const run = await ctx.h.http().post('/api/v1/automations/run').set(user.auth).send({ automationId });
    expect(run.status).toBe(402);
    expect(run.body.code).toBe('budget_exhausted');
    const dryRun = await ctx.h.http().post('/api/v1/automations/test').set(user.auth).send({ name: 'Draft', prompt: 'Hi', execute: true });
    expect(dryRun.status).toBe(402);
    expect([await count('messages'), await count('automation_runs')]).toEqual([messages, runs]);
    expect(servers.model.requests.filter((r) => r.body.messages.some((m) => m.content === 'Hello' || m.content === 'Hi'))).toHaveLength(0);

    await adjust(user.userId, 300);
    const reply = await chat(user, conversationId);
    expect(reply.status).toBe(200);
    expect(reply.body.reply.usage).toMatchObject({ costCents: 200 });
    // 300 − 200: the reply was charged to the balance, with its ledger entry.
    const usage = await ctx.h
      .http()
      .get('/api/v1/admin/usage')
      .query({ userId: user.userId })
      .set((await admin()).auth)
      .expect(200);
    expect(usage.body.budget.balanceCents).toBe(100);
    expect(usage.body.entries[0]).toMatchObject({ kind: 'usage', amountCents: -200, balanceAfterCents: 100, actorUserId: user.userId });
    // The reply's charge written again (a write tried again after its commit's answer was lost): neither recorded nor charged twice.
    const replyId: string = reply.body.reply.messageId;
    const recorded = await db().selectFrom('usage_records').selectAll().where('resource_id', '=', replyId).execute();
    expect(recorded).toHaveLength(1);
    const again = await db()
      .transaction()
      .execute((trx) =>
        ctx.h.runtime.services.billing.charge(trx, {
          userId: user.userId,
          kind: 'chat.reply',
          resourceId: replyId,
          model: {
            id: recorded[0]!.model,
            providerId: 'openai',
            name: recorded[0]!.model,
            inputCentsPerMillionTokens: 1e9,
            outputCentsPerMillionTokens: 1e9,
            default: false,
          },
          usage: { inputTokens: 10, outputTokens: 10 },
          at: new Date(),
        }),
      );
    expect(again).toBe(0);
    expect(await db().selectFrom('usage_records').select('id').where('resource_id', '=', replyId).execute()).toHaveLength(1);
    expect(
      (
        await ctx.h
          .http()
          .get('/api/v1/admin/usage')
          .query({ userId: user.userId })
          .set((await admin()).auth)
          .expect(200)
      ).body.budget.balanceCents,
    ).toBe(100);
    await ctx.h.http().post('/api/v1/automations/run').set(user.auth).send({ automationId }).expect(200);
    await ctx.h.runtime.runner.runOnce();
    // The run cost 200 with 100 left: it completes, and the balance owes the rest.
    const state = await subscription(user);
    expect(state.usage).toMatchObject({ spentCents: 400, allowanceRemainingCents: 0, balanceCents: -100, availableCents: -100 });
    expect((await chat(user, conversationId)).status).toBe(402);
    await adjust(user.userId, 150);
    expect((await chat(user, conversationId)).status).toBe(200);
  });

  test('deciding an approval checks the budget again: spent while the turn waited, the reply fails budget_exhausted and the call does not run', async () => {
    const user = await ctx.h.newUser('waiter');
    await adjust(user.userId, 300);
    const conversationId = await conversation(user);
    // The first step, a call of notes_create (which needs approval), costs 150 + 150 cents: nothing is left.
    const args = { title: 'Paid for', content: 'Written after the budget ran out.' };
    servers.model.behaviour = () => ({
      kind: 'tool-calls',
      calls: [{ id: 'call_b1', name: 'notes_create', arguments: JSON.stringify(args) }],
      usage: { prompt: 1_500_000, completion: 750_000 },
    });
    const paused = await chat(user, conversationId).expect(200);
    expect(paused.body.reply).toMatchObject({ status: 'awaiting_approval', usage: { costCents: 300 } });
    const approvalId = paused.body.reply.parts.find((p: { type: string }) => p.type === 'tool-call').approvalId as string;
    const requests = servers.model.requests.length;

    // Another user cannot decide it (404), and that changes nothing.
    expect((await ctx.h.http().post('/api/v1/approvals/decide').set(ctx.bob.auth).send({ approvalId, decision: 'approve' })).status).toBe(
      404,
    );
    const decided = await ctx.h.http().post('/api/v1/approvals/decide').set(user.auth).send({ approvalId, decision: 'approve' });
    expect(decided.status).toBe(200);
    expect(decided.body.approval).toMatchObject({ approvalId, status: 'approved' });
    expect(decided.body.reply).toMatchObject({
      status: 'failed',
      errorCode: 'budget_exhausted',
      errorMessage: expect.stringContaining('the approved call did not run'),
      usage: null,
    });
    // Neither the tool nor the model ran; nothing more was charged.
    expect(servers.model.requests.length).toBe(requests);
    const notes = (await ctx.h.http().get('/api/v1/notes').set(user.auth).expect(200)).body.notes as Array<{ title: string }>;
    expect(notes.map((n) => n.title)).not.toContain(args.title);
    const usage = await ctx.h
      .http()
      .get('/api/v1/admin/usage')
      .query({ userId: user.userId })
      .set((await admin()).auth)
      .expect(200);
    expect(usage.body.budget.balanceCents).toBe(0);
    const stored = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(user.auth).expect(200);
    expect(stored.body.messages[0]).toMatchObject({
      messageId: paused.body.reply.messageId,
      status: 'failed',
      errorCode: 'budget_exhausted',
    });
    // A decision is single use, also when the turn could not continue.
    expect((await ctx.h.http().post('/api/v1/approvals/decide').set(user.auth).send({ approvalId, decision: 'deny' })).status).toBe(409);
  });

  test('a scheduled run that starts with nothing left fails with budget_exhausted, without calling the model', async () => {
    const user = await ctx.h.newUser('scheduled');
    const automationId = (
      await ctx.h
        .http()
        .post('/api/v1/automations')
        .set(user.auth)
        .send({ name: 'Later', prompt: 'Queued prompt.', schedule: { cron: '* * * * *', timezone: 'UTC' } })
        .expect(200)
    ).body.automation.automationId;
    expect(await ctx.h.runtime.scheduler.tick(new Date(Date.now() + 61_000))).toBeGreaterThanOrEqual(1);
    await ctx.h.runtime.runner.runOnce();
    const runs = await eventually(async () => {
      const res = await ctx.h.http().get('/api/v1/automations/runs').query({ automationId }).set(user.auth).expect(200);
      return res.body.runs.length > 0 && res.body.runs[0].status === 'failed' ? res.body.runs : undefined;
    }, 5000);
    expect(runs[0]).toMatchObject({ status: 'failed', errorCode: 'budget_exhausted', trigger: 'schedule' });
    expect(servers.model.requests.some((r) => r.body.messages.some((m) => m.content === 'Queued prompt.'))).toBe(false);
  });

  test('the plan’s monthly budget is spent first, then the balance; fractions of a cent carry over', async () => {
    const user = await ctx.h.newUser('planned');
    await deliver(
      ctx.h,
      JSON.stringify(
        stripeEvent(
          'customer.subscription.created',
          subscriptionObject({
            id: `sub_${randomUUID()}`,
            customer: `cus_${randomUUID()}`,
            userId: user.userId,
            start: Math.floor(Date.now() / 1000) - 3600,
            end: Math.floor(Date.now() / 1000) + 86_400,
          }),
        ),
      ),
    ).expect(200);
    const conversationId = await conversation(user);
    for (let i = 0; i < 2; i += 1) await chat(user, conversationId).expect(200);
    expect((await subscription(user)).usage).toMatchObject({
      spentCents: 400,
      allowanceRemainingCents: 100,
      balanceCents: 0,
      availableCents: 100,
    });
    // 100.5 cents: 100 from the allowance, half a cent carried against the balance.
    servers.model.behaviour = () => ({ kind: 'reply', chunks: ['Ok.'], usage: { prompt: 1_000_000, completion: 2_500 } });
    await chat(user, conversationId).expect(200);
    expect((await subscription(user)).usage).toMatchObject({
      spentCents: 500,
      allowanceRemainingCents: 0,
      balanceCents: 0,
      availableCents: -1,
    });
    expect((await chat(user, conversationId)).status).toBe(402);
  });

  test('the user’s own spending limit caps the period; settings are the caller’s own', async () => {
    const user = await ctx.h.newUser('limited');
    await adjust(user.userId, 1000);
    const set = await ctx.h
      .http()
      .post('/api/v1/subscription/settings')
      .set(user.auth)
      .send({ monthlySpendingLimitCents: 200 })
      .expect(200);
    expect(set.body.settings).toEqual({
      provider: 'stripe',
      currency: 'usd',
      monthlySpendingLimitCents: 200,
      updatedAt: expect.any(Number),
    });
    const conversationId = await conversation(user);
    await chat(user, conversationId).expect(200);
    expect((await chat(user, conversationId)).status).toBe(402);
    expect((await subscription(user)).usage).toMatchObject({
      spentCents: 200,
      spendingLimitCents: 200,
      availableCents: 0,
      balanceCents: 800,
    });
    // Another user's settings are untouched.
    const bob = await ctx.h.http().get('/api/v1/subscription/settings').set(ctx.bob.auth).expect(200);
    expect(bob.body.settings.monthlySpendingLimitCents).toBeNull();
    await ctx.h.http().post('/api/v1/subscription/settings').set(user.auth).send({ monthlySpendingLimitCents: null }).expect(200);
    await chat(user, conversationId).expect(200);
  });

  test('bad settings are 400 and change nothing', async () => {
    const user = await ctx.h.newUser('bad');
    for (const body of [
      {},
      { monthlySpendingLimitCents: -1 },
      { monthlySpendingLimitCents: 1.5 },
      { monthlySpendingLimitCents: '5' },
      { monthlySpendingLimitCents: 5, plan: 'pro' },
      { monthlySpendingLimitCents: 100_000_001 },
    ]) {
      const res = await ctx.h.http().post('/api/v1/subscription/settings').set(user.auth).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    expect((await ctx.h.http().get('/api/v1/subscription/settings').set(user.auth).expect(200)).body.settings.updatedAt).toBeNull();
    expect((await ctx.h.http().get('/api/v1/subscription')).status).toBe(401);
    expect((await ctx.h.http().get('/api/v1/subscription').query({ userId: 'x' }).set(user.auth)).status).toBe(400);
  });
});
