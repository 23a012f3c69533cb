import { randomUUID } from 'node:crypto';
import { anotherInstance, useHarnessWith, userNamed } from '../helpers/harness';
import { eventually } from '../helpers/receiver';

// Billing off (the default): the self-hosted plan with the configured entitlements.
const rootId = `root-${randomUUID()}`;
const ctx = useHarnessWith(
  () => ({
    BOOTSTRAP_ADMIN_USER_IDS: rootId,
    ENTITLEMENT_STORAGE: '1kb',
    ENTITLEMENT_AUTOMATIONS: '1',
    CAPABILITY_CACHE_MS: '500',
  }),
  'alice',
  'bob',
);

const admin = () => userNamed(ctx.h, rootId);

const switchBilling = async (on: boolean) =>
  ctx.h
    .http()
    .patch('/api/v1/admin/capabilities')
    .set((await admin()).auth)
    .send({ billing: on })
    .expect(200);

describe('billing with provider none', () => {
  test('capabilities say billing false and provider none; the subscription reads as the self-hosted plan', async () => {
    const caps = await ctx.h.http().get('/api/v1/capabilities').set(ctx.alice.auth).expect(200);
    expect(caps.body.capabilities).toMatchObject({ billing: false, billingProvider: 'none' });
    const res = await ctx.h.http().get('/api/v1/subscription').set(ctx.alice.auth).expect(200);
    const now = new Date();
    expect(res.body.subscription).toEqual({
      plan: 'self_hosted',
      status: 'none',
      provider: 'none',
      subscriptionId: null,
      currentPeriodStart: null,
      currentPeriodEnd: null,
      cancelAtPeriodEnd: false,
      latestInvoice: null,
      entitlements: { monthlyBudgetCents: null, storageBytes: 1024, automations: 1 },
      usage: {
        periodStart: Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1),
        periodEnd: Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1),
        spentCents: 0,
        allowanceRemainingCents: null,
        balanceCents: 0,
        spendingLimitCents: null,
        availableCents: null,
        storageUsedBytes: 0,
        automationCount: 0,
      },
      updatedAt: null,
    });
  });

  test('settings read provider none; updating them is capability_disabled and stores nothing', async () => {
    const settings = await ctx.h.http().get('/api/v1/subscription/settings').set(ctx.alice.auth).expect(200);
    expect(settings.body.settings).toEqual({ provider: 'none', currency: 'usd', monthlySpendingLimitCents: null, updatedAt: null });
    const denied = await ctx.h.http().post('/api/v1/subscription/settings').set(ctx.alice.auth).send({ monthlySpendingLimitCents: 100 });
    expect(denied.status).toBe(403);
    expect(denied.body).toEqual({ error: 'Billing is disabled for this deployment.', code: 'capability_disabled', capability: 'billing' });
    const after = await ctx.h.http().get('/api/v1/subscription/settings').set(ctx.alice.auth).expect(200);
    expect(after.body.settings.updatedAt).toBeNull();
  });

  test('without a webhook secret the provider route is not served', async () => {
    const res = await ctx.h.http().post('/webhooks/stripe').set('Content-Type', 'application/json').send('{}');
    expect(res.status).toBe(404);
  });

  test('switching billing on and off at run time flips all four behaviours, on another instance too', async () => {
    const other = await anotherInstance(ctx.h, { CAPABILITY_CACHE_MS: '500' });
    try {
      expect((await other.services.billing.preferences(ctx.bob.userId)).provider).toBe('none');
      await switchBilling(true);
      // This instance dropped its cache; the other sees the switch within its cache interval.
      const caps = await ctx.h.http().get('/api/v1/capabilities').set(ctx.bob.auth).expect(200);
      expect(caps.body.capabilities).toMatchObject({ billing: true, billingProvider: 'stripe' });
      await eventually(async () => ((await other.services.billing.preferences(ctx.bob.userId)).provider === 'stripe' ? true : undefined));
      expect((await other.services.billing.subscription(ctx.bob.userId)).standing.plan).toBe('free');
      const sub = await ctx.h.http().get('/api/v1/subscription').set(ctx.bob.auth).expect(200);
      expect(sub.body.subscription).toMatchObject({ plan: 'free', provider: 'stripe', status: 'none' });
      const set = await ctx.h
        .http()
        .post('/api/v1/subscription/settings')
        .set(ctx.bob.auth)
        .send({ monthlySpendingLimitCents: 250 })
        .expect(200);
      expect(set.body.settings).toMatchObject({ provider: 'stripe', monthlySpendingLimitCents: 250 });

      await switchBilling(false);
      expect(
        (await ctx.h.http().post('/api/v1/subscription/settings').set(ctx.bob.auth).send({ monthlySpendingLimitCents: 1 })).status,
      ).toBe(403);
      const off = await ctx.h.http().get('/api/v1/subscription').set(ctx.bob.auth).expect(200);
      expect(off.body.subscription).toMatchObject({ plan: 'self_hosted', provider: 'none' });
      await eventually(async () => ((await other.services.billing.preferences(ctx.bob.userId)).provider === 'none' ? true : undefined));
      // The refused update changed nothing.
      const settings = await ctx.h.http().get('/api/v1/subscription/settings').set(ctx.bob.auth).expect(200);
      expect(settings.body.settings.monthlySpendingLimitCents).toBe(250);
    } finally {
      await other.close();
    }
  });
});

describe('entitlements', () => {
  test('storage: a file beyond the plan is 402 quota_exceeded and not created; folders take no space', async () => {
    const user = await ctx.h.newUser('storage');
    await ctx.h.http().post('/api/v1/files').set(user.auth).send({ name: 'a.txt', mimeType: 'text/plain', sizeBytes: 1000 }).expect(200);
    await ctx.h.http().post('/api/v1/files').set(user.auth).send({ name: 'dir', kind: 'folder' }).expect(200);
    const over = await ctx.h.http().post('/api/v1/files').set(user.auth).send({ name: 'b.txt', mimeType: 'text/plain', sizeBytes: 25 });
    expect(over.status).toBe(402);
    expect(over.body).toMatchObject({ code: 'quota_exceeded', entitlement: 'storageBytes', limit: 1024, used: 1000 });
    const list = await ctx.h.http().get('/api/v1/files').set(user.auth).expect(200);
    expect(list.body.files.map((f: { name: string }) => f.name).sort()).toEqual(['a.txt', 'dir']);
    await ctx.h.http().post('/api/v1/files').set(user.auth).send({ name: 'c.txt', mimeType: 'text/plain', sizeBytes: 24 }).expect(200);
    // Another user's space is their own.
    await ctx.h.http().post('/api/v1/files').set(ctx.bob.auth).send({ name: 'b.txt', mimeType: 'text/plain', sizeBytes: 1024 }).expect(200);
    const sub = await ctx.h.http().get('/api/v1/subscription').set(user.auth).expect(200);
    expect(sub.body.subscription.usage.storageUsedBytes).toBe(1024);
  });

  test('concurrent creates cannot both take the last space', async () => {
    const user = await ctx.h.newUser('race');
    const create = () => ctx.h.http().post('/api/v1/files').set(user.auth).send({ name: 'x', mimeType: 'text/plain', sizeBytes: 600 });
    const statuses = (await Promise.all([create(), create(), create()])).map((r) => r.status).sort();
    expect(statuses).toEqual([200, 402, 402]);
  });

  test('automations: one more than the plan allows is 402 quota_exceeded; deleting one frees the slot', async () => {
    const user = await ctx.h.newUser('automations');
    const create = () => ctx.h.http().post('/api/v1/automations').set(user.auth).send({ name: 'Daily', prompt: 'Summarize.' });
    const first = await create().expect(200);
    const second = await create();
    expect(second.status).toBe(402);
    expect(second.body).toMatchObject({ code: 'quota_exceeded', entitlement: 'automations', limit: 1, used: 1 });
    expect((await ctx.h.http().get('/api/v1/automations').set(user.auth)).body.automations).toHaveLength(1);
    await ctx.h.http().delete('/api/v1/automations').set(user.auth).send({ automationId: first.body.automation.automationId }).expect(200);
    await create().expect(200);
  });
});
