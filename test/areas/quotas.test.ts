import { randomUUID } from 'node:crypto';
import { type TestUser, useHarnessWith, userNamed } from '../helpers/harness';
import { useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually, subscribe, verify } from '../helpers/receiver';

// A cent per input token, output free: a first message "Hello" reserves 15 cents (the characters
// of its known prompt) and the fake model's 10 prompt tokens cost 10 cents.
const servers = useFakeModelAndReceiver();
const rootId = `root-${randomUUID()}`;
const ctx = useHarnessWith(
  () => ({
    MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
    MODEL_PROVIDER_MODELS: 'test-model:1000000:0',
    WEBHOOK_ALLOW_LOOPBACK: 'true',
    WEBHOOK_POLL_INTERVAL_MS: '20',
    BOOTSTRAP_ADMIN_USER_IDS: rootId,
  }),
  'alice',
  'bob',
);
beforeEach(() => {
  servers.model.behaviour = () => ({ kind: 'reply', chunks: ['Fine.'], usage: { prompt: 10, completion: 5 } });
});

const db = () => ctx.h.runtime.database.db;
const root = () => userNamed(ctx.h, rootId);
const admin = async () => (await root()).auth;

async function auditor(): Promise<TestUser> {
  const user = await ctx.h.newUser('auditor');
  await ctx.h
    .http()
    .post('/api/v1/admin/principals')
    .set(await admin())
    .send({ userId: user.userId, role: 'auditor', reason: 'test' })
    .expect(200);
  return user;
}

async function group(members: TestUser[]): Promise<string> {
  const made = await ctx.h
    .http()
    .post('/api/v1/admin/groups')
    .set(await admin())
    .send({ name: `Team ${randomUUID()}` })
    .expect(200);
  const groupId: string = made.body.group.groupId;
  if (members.length === 0) return groupId;
  await ctx.h
    .http()
    .patch('/api/v1/admin/groups/members')
    .set(await admin())
    .send({ groupId, add: members.map((m) => m.userId) })
    .expect(200);
  return groupId;
}

const createQuota = async (body: Record<string, unknown>) =>
  ctx.h
    .http()
    .post('/api/v1/admin/quotas')
    .set(await admin())
    .send(body);

/** A titled conversation (so that only its replies are charged) and one message in it. */
async function chat(user: TestUser) {
  const created = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({ title: 'Quota' }).expect(200);
  return ctx.h
    .http()
    .post('/api/v1/conversations/messages')
    .set(user.auth)
    .send({ conversationId: created.body.conversation.conversationId, content: 'Hello' });
}

const usage = async (user: TestUser) => (await ctx.h.http().get('/api/v1/usage').set(user.auth).expect(200)).body.usage;
const audited = (action: string, resourceId: string) =>
  db().selectFrom('audit_events').selectAll().where('action', '=', action).where('resource_id', '=', resourceId).execute();
/** What the users' charged calls cost, from the usage ledger, in cents. */
async function charged(users: TestUser[]): Promise<number> {
  const rows = await db()
    .selectFrom('usage_records')
    .select('cost_micro_cents')
    .where(
      'user_id',
      'in',
      users.map((u) => u.userId),
    )
    .execute();
  return rows.reduce((n, r) => n + Number(r.cost_micro_cents), 0) / 1e6;
}
const quotaRows = async () =>
  Number(
    (
      await db()
        .selectFrom('quotas')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

describe('admin quotas', () => {
  test('an admin creates, reads, changes and deletes a quota, each change audited; an auditor reads', async () => {
    const groupId = await group([]);
    const created = await createQuota({ groupId, period: 'month', limitCents: 500, thresholdPercent: 80 });
    expect(created.status).toBe(200);
    const quota = created.body.quota;
    expect(quota).toEqual({
      quotaId: expect.any(String),
      groupId,
      model: null,
      period: 'month',
      limitCents: 500,
      thresholdPercent: 80,
      createdAt: expect.any(Number),
      updatedAt: expect.any(Number),
    });
    expect(await audited('administration.quota.create', quota.quotaId)).toHaveLength(1);
    const reader = await auditor();
    const one = await ctx.h.http().get('/api/v1/admin/quotas').query({ quotaId: quota.quotaId }).set(reader.auth).expect(200);
    expect(one.body.quota).toEqual(quota);
    const page = await ctx.h.http().get('/api/v1/admin/quotas').query({ limit: 200 }).set(reader.auth).expect(200);
    expect(page.body.quotas.map((q: { quotaId: string }) => q.quotaId)).toContain(quota.quotaId);

    const changed = await ctx.h
      .http()
      .patch('/api/v1/admin/quotas')
      .set(await admin())
      .send({ quotaId: quota.quotaId, limitCents: 700, thresholdPercent: null, period: 'day' });
    expect(changed.status).toBe(200);
    expect(changed.body.quota).toMatchObject({ limitCents: 700, thresholdPercent: null, period: 'day', groupId });
    expect(await audited('administration.quota.update', quota.quotaId)).toHaveLength(1);

    // The auditor reads but does not write; a user does neither.
    const before = await quotaRows();
    expect((await ctx.h.http().post('/api/v1/admin/quotas').set(reader.auth).send({ groupId, period: 'day', limitCents: 1 })).status).toBe(
      403,
    );
    expect((await ctx.h.http().delete('/api/v1/admin/quotas').set(reader.auth).send({ quotaId: quota.quotaId })).status).toBe(403);
    expect((await ctx.h.http().get('/api/v1/admin/quotas').set(ctx.alice.auth)).status).toBe(403);
    expect(
      (await ctx.h.http().post('/api/v1/admin/quotas').set(ctx.alice.auth).send({ groupId, period: 'day', limitCents: 1 })).status,
    ).toBe(403);
    expect(await quotaRows()).toBe(before);

    const deleted = await ctx.h
      .http()
      .delete('/api/v1/admin/quotas')
      .set(await admin())
      .send({ quotaId: quota.quotaId });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ quotaId: quota.quotaId, deleted: true });
    expect(await audited('administration.quota.delete', quota.quotaId)).toHaveLength(1);
    const gone = await ctx.h
      .http()
      .get('/api/v1/admin/quotas')
      .query({ quotaId: quota.quotaId })
      .set(await admin());
    expect(gone.status).toBe(404);
    const again = await ctx.h
      .http()
      .delete('/api/v1/admin/quotas')
      .set(await admin())
      .send({ quotaId: quota.quotaId });
    expect(again.status).toBe(404);
  });

  test('bad input is 400 (or 404 for an unknown group) and changes nothing', async () => {
    const groupId = await group([]);
    const before = await quotaRows();
    for (const body of [
      { period: 'month', limitCents: 100 },
      { groupId, period: 'week', limitCents: 100 },
      { groupId, period: 'month', limitCents: -1 },
      { groupId, period: 'month', limitCents: 1.5 },
      { groupId, period: 'month', limitCents: 100, thresholdPercent: 100 },
      { groupId, period: 'month', limitCents: 100, thresholdPercent: 0 },
      { model: 'has space', period: 'month', limitCents: 100 },
      { groupId, period: 'month', limitCents: 100, extra: true },
    ]) {
      const res = await createQuota(body);
      expect([res.status, res.body.code]).toEqual([400, 'invalid_request']);
    }
    const unknown = await createQuota({ groupId: 'no-such-group', period: 'month', limitCents: 100 });
    expect(unknown.status).toBe(404);
    expect(unknown.body.details).toEqual([expect.objectContaining({ path: '/body/groupId' })]);
    const unknownPatch = await ctx.h
      .http()
      .patch('/api/v1/admin/quotas')
      .set(await admin())
      .send({ quotaId: 'nope', limitCents: 1 });
    expect(unknownPatch.status).toBe(404);
    const emptyPatch = await ctx.h
      .http()
      .patch('/api/v1/admin/quotas')
      .set(await admin())
      .send({ quotaId: 'nope' });
    expect(emptyPatch.status).toBe(400);
    expect(await quotaRows()).toBe(before);
  });
});

describe('quotas enforced on charged calls', () => {
  test('a group budget stops its members at N with 402 while a non-member goes on', async () => {
    const member = await ctx.h.newUser('member');
    const outsider = await ctx.h.newUser('outsider');
    const groupId = await group([member]);
    const { quotaId } = (await createQuota({ groupId, period: 'month', limitCents: 50 })).body.quota;
    // 10 cents each, 15 held while a call runs: the fifth (40 spent + 15 > 50) is refused.
    for (let i = 0; i < 4; i += 1) expect((await chat(member)).status).toBe(200);
    const messagesBefore = await db().selectFrom('messages').select('id').where('owner_user_id', '=', member.userId).execute();
    const calls = servers.model.requests.length;
    const refused = await chat(member);
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({
      code: 'quota_exceeded',
      quotaId,
      groupId,
      model: null,
      limitCents: 50,
      periodEnd: expect.any(Number),
    });
    expect(refused.body.error).toContain("group's quota");
    // The model was not called and nothing was stored.
    expect(servers.model.requests.length).toBe(calls);
    expect(await db().selectFrom('messages').select('id').where('owner_user_id', '=', member.userId).execute()).toHaveLength(
      messagesBefore.length,
    );
    expect(await charged([member])).toBe(40);
    expect((await chat(outsider)).status).toBe(200);

    const seen = await usage(member);
    expect(seen.quotas).toEqual([
      expect.objectContaining({
        quotaId,
        groupId,
        limitCents: 50,
        spentCents: 40,
        reservedCents: 0,
        remainingCents: 10,
        thresholdPercent: null,
      }),
    ]);
    // Raising the limit lets the member go on.
    await ctx.h
      .http()
      .patch('/api/v1/admin/quotas')
      .set(await admin())
      .send({ quotaId, limitCents: 100 })
      .expect(200);
    expect((await chat(member)).status).toBe(200);
  });

  test('20 concurrent chat calls by members never take the group past its limit', async () => {
    const members = [await ctx.h.newUser('c1'), await ctx.h.newUser('c2'), await ctx.h.newUser('c3'), await ctx.h.newUser('c4')];
    const groupId = await group(members);
    const { quotaId } = (await createQuota({ groupId, period: 'day', limitCents: 100 })).body.quota;
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(members[i % members.length] as TestUser)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
    const ok = statuses.filter((s) => s === 200).length;
    expect(ok).toBeGreaterThan(0);
    expect(ok).toBeLessThan(20);
    for (const refused of answers.filter((a) => a.status === 402)) expect(refused.body).toMatchObject({ code: 'quota_exceeded', quotaId });
    expect(await charged(members)).toBe(ok * 10);
    expect(await charged(members)).toBeLessThanOrEqual(100);
    const [quota] = (await usage(members[0] as TestUser)).quotas;
    expect(quota).toMatchObject({ quotaId, spentCents: ok * 10, reservedCents: 0 });
    expect(quota.spentCents).toBeLessThanOrEqual(100);
  });

  test('a model quota limits every user of the model; per model within a group only its members', async () => {
    const member = await ctx.h.newUser('modeled');
    const other = await ctx.h.newUser('other');
    const groupId = await group([member]);
    const inGroup = (await createQuota({ groupId, model: 'test-model', period: 'month', limitCents: 0 })).body.quota;
    const refused = await chat(member);
    expect(refused.body).toMatchObject({ code: 'quota_exceeded', quotaId: inGroup.quotaId, groupId, model: 'test-model' });
    expect((await chat(other)).status).toBe(200);
    const deployment = (await createQuota({ model: 'test-model', period: 'month', limitCents: 0 })).body.quota;
    try {
      const both = await chat(other);
      expect([both.status, both.body.code, both.body.quotaId]).toEqual([402, 'quota_exceeded', deployment.quotaId]);
      // The OpenAI-compatible API is held to it too.
      const v1 = await ctx.h
        .http()
        .post('/v1/chat/completions')
        .set(other.auth)
        .send({ model: 'test-model', messages: [{ role: 'user', content: 'Hi' }] });
      expect(v1.status).toBe(402);
      expect(v1.body.error).toMatchObject({ code: 'quota_exceeded' });
    } finally {
      await ctx.h
        .http()
        .delete('/api/v1/admin/quotas')
        .set(await admin())
        .send({ quotaId: deployment.quotaId })
        .expect(200);
    }
    expect((await chat(other)).status).toBe(200);
  });

  test('the soft threshold sends usage.threshold_reached once in the period', async () => {
    const member = await ctx.h.newUser('thresholded');
    const groupId = await group([member]);
    const { quotaId } = (await createQuota({ groupId, period: 'month', limitCents: 100, thresholdPercent: 30 })).body.quota;
    const { secret } = await subscribe(ctx.h, member, `${servers.receiver.url}/threshold-${quotaId}`, ['usage.threshold_reached']);
    // 10, 20, 30 (reached), 40, 50 cents.
    for (let i = 0; i < 5; i += 1) expect((await chat(member)).status).toBe(200);
    const request = await eventually(() => servers.receiver.received.find((r) => r.path.endsWith(`/threshold-${quotaId}`)));
    const payload = verify(secret, request);
    expect(payload).toMatchObject({
      type: 'usage.threshold_reached',
      data: {
        quotaId,
        groupId,
        model: null,
        period: 'month',
        limitCents: 100,
        spentCents: 30,
        thresholdPercent: 30,
        userId: member.userId,
      },
    });
    const events = await db()
      .selectFrom('webhook_events')
      .select('id')
      .where('owner_user_id', '=', member.userId)
      .where('type', '=', 'usage.threshold_reached')
      .execute();
    expect(events).toHaveLength(1);
    expect((await usage(member)).quotas[0]).toMatchObject({ quotaId, thresholdReached: true, spentCents: 50 });
  });
});

describe('GET /api/v1/usage', () => {
  test('shows each user only their own spend by model and the quotas that apply to them', async () => {
    const one = await ctx.h.newUser('own1');
    const two = await ctx.h.newUser('own2');
    const groupId = await group([one]);
    const { quotaId } = (await createQuota({ groupId, period: 'month', limitCents: 1000 })).body.quota;
    expect((await chat(one)).status).toBe(200);
    expect((await chat(one)).status).toBe(200);
    expect((await chat(two)).status).toBe(200);
    const first = await usage(one);
    expect(first.models).toEqual([{ model: 'test-model', calls: 2, inputTokens: 20, outputTokens: 10, spentCents: 20 }]);
    expect(first.quotas.map((q: { quotaId: string }) => q.quotaId)).toContain(quotaId);
    expect(first.budget).toMatchObject({ spentCents: 20, periodStart: expect.any(Number), periodEnd: expect.any(Number) });
    const second = await usage(two);
    expect(second.models).toEqual([{ model: 'test-model', calls: 1, inputTokens: 10, outputTokens: 5, spentCents: 10 }]);
    expect(second.quotas.map((q: { quotaId: string }) => q.quotaId)).not.toContain(quotaId);
    expect((await ctx.h.http().get('/api/v1/usage').query({ userId: one.userId }).set(two.auth)).status).toBe(400);
  });
});
