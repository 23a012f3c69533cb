import { sql } from 'kysely';
import { tableRowCounts, type TestUser, useHarnessWith, userNamed } from '../helpers/harness';
import { useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually, subscribe, verify } from '../helpers/receiver';

const servers = useFakeModelAndReceiver();
const ADMIN = 'feedback-admin';
const ctx = useHarnessWith(
  () => ({
    MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
    MODEL_PROVIDER_MODELS: 'test-model:100:200',
    WEBHOOK_ALLOW_LOOPBACK: 'true',
    WEBHOOK_POLL_INTERVAL_MS: '20',
    BOOTSTRAP_ADMIN_USER_IDS: ADMIN,
  }),
  'alice',
  'bob',
);
beforeEach(() => {
  servers.model.behaviour = () => ({ kind: 'reply', chunks: ['Hello', ' there.'], usage: { prompt: 10, completion: 5 } });
});

/** A conversation of `user` with one exchange: its message's and reply's ids. */
async function exchange(user: TestUser, body: Record<string, unknown> = {}) {
  const created = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send(body);
  const conversationId = created.body.conversation.conversationId as string;
  const res = await ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send({ conversationId, content: 'Hi' });
  expect(res.status).toBe(200);
  // Its model-written title is charged in the background: done before anything is counted.
  await ctx.h.runtime.services.chat.titles.idle();
  return { conversationId, messageId: res.body.message.messageId as string, replyId: res.body.reply.messageId as string };
}

const rate = (user: TestUser, body: Record<string, unknown>) =>
  ctx.h.http().post('/api/v1/conversations/messages/feedback').set(user.auth).send(body);

describe('POST /api/v1/conversations/messages/feedback', () => {
  test('gives and changes the feedback on a reply (one per user and reply), with message.feedback', async () => {
    const { subscription, secret } = await subscribe(ctx.h, ctx.alice, `${servers.receiver.url}/feedback`, ['message.feedback']);
    expect(subscription.subscriptionId).toBeDefined();
    const { conversationId, replyId } = await exchange(ctx.alice);
    const first = await rate(ctx.alice, { messageId: replyId, rating: 'up', reason: 'helpful', comment: 'Spot on.' });
    expect(first.status).toBe(200);
    expect(first.body.feedback).toEqual({
      feedbackId: expect.any(String),
      messageId: replyId,
      conversationId,
      rating: 'up',
      reason: 'helpful',
      comment: 'Spot on.',
      createdAt: expect.any(Number),
      updatedAt: expect.any(Number),
    });
    const changed = await rate(ctx.alice, { messageId: replyId, rating: 'down', comment: 'On second thought, wrong.' });
    expect(changed.status).toBe(200);
    expect(changed.body.feedback).toEqual({
      ...first.body.feedback,
      rating: 'down',
      reason: null,
      comment: 'On second thought, wrong.',
      updatedAt: expect.any(Number),
    });
    expect(changed.body.feedback.updatedAt).toBeGreaterThanOrEqual(first.body.feedback.updatedAt);
    const stored = await sql<{ n: number }>`select count(*)::int as n from message_feedback where message_id = ${replyId}`.execute(
      ctx.h.runtime.database.db,
    );
    expect(stored.rows[0]?.n).toBe(1);

    const events = await eventually(() => {
      const got = servers.receiver.received.filter((r) => r.path === '/hook/feedback').map((r) => verify(secret, r));
      return got.length >= 2 ? got : undefined;
    });
    expect(events.map((e) => [e.type, e.data])).toEqual([
      [
        'message.feedback',
        {
          feedbackId: first.body.feedback.feedbackId,
          conversationId,
          messageId: replyId,
          model: 'test-model',
          rating: 'up',
          reason: 'helpful',
          comment: 'Spot on.',
        },
      ],
      [
        'message.feedback',
        {
          feedbackId: first.body.feedback.feedbackId,
          conversationId,
          messageId: replyId,
          model: 'test-model',
          rating: 'down',
          reason: null,
          comment: 'On second thought, wrong.',
        },
      ],
    ]);
  });

  test('another user’s reply or none is 404; a user message is 400; bad bodies are 400; none changes anything', async () => {
    const { messageId, replyId } = await exchange(ctx.alice);
    const before = await tableRowCounts(ctx.h);
    const another = await rate(ctx.bob, { messageId: replyId, rating: 'up' });
    expect(another.status).toBe(404);
    expect(another.body.code).toBe('not_found');
    expect((await rate(ctx.alice, { messageId: '01936d2e-7b1a-7c3e-9f00-5a2b9c4d1e99', rating: 'up' })).status).toBe(404);
    const userMessage = await rate(ctx.alice, { messageId, rating: 'up' });
    expect(userMessage.status).toBe(400);
    expect(userMessage.body.details).toEqual([expect.objectContaining({ path: '/body/messageId' })]);
    for (const body of [
      { messageId: replyId },
      { rating: 'up' },
      { messageId: replyId, rating: 'meh' },
      { messageId: replyId, rating: 'up', reason: '' },
      { messageId: replyId, rating: 'up', reason: 'x'.repeat(101) },
      { messageId: replyId, rating: 'up', comment: 'x'.repeat(4001) },
      { messageId: replyId, rating: 'up', comment: '   ' },
      { messageId: replyId, rating: 'up', extra: true },
      { messageId: '', rating: 'up' },
    ]) {
      const res = await rate(ctx.alice, body);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(res.body.code).toBe('invalid_request');
    }
    expect(await tableRowCounts(ctx.h)).toEqual(before);
  });

  test('a skill’s greeting is 400; a reply still being written is 409', async () => {
    const skill = await ctx.h.http().post('/api/v1/skills').set(ctx.alice.auth).send({ name: 'Helper', greeting: 'Hello!' });
    expect(skill.status).toBe(200);
    const created = await ctx.h.http().post('/api/v1/conversations').set(ctx.alice.auth).send({ title: 'Greeted' });
    const conversationId = created.body.conversation.conversationId as string;
    const greeting = await ctx.h
      .http()
      .post('/api/v1/conversations/agent-greeting')
      .set(ctx.alice.auth)
      .send({ conversationId, skillId: skill.body.skill.skillId });
    expect(greeting.status).toBe(200);
    expect((await rate(ctx.alice, { messageId: greeting.body.message.messageId, rating: 'up' })).status).toBe(400);

    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    servers.model.behaviour = () => ({ kind: 'hold', until: held, then: { kind: 'reply', chunks: ['Late.'] } });
    const sending = ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Slow one' })
      .then((res) => res);
    const generating = await eventually(async () => {
      const list = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(ctx.alice.auth);
      return (list.body.messages as Array<{ messageId: string; status: string }>).find((m) => m.status === 'generating');
    });
    const early = await rate(ctx.alice, { messageId: generating.messageId, rating: 'up' });
    expect(early.status).toBe(409);
    expect(early.body.code).toBe('conflict');
    release();
    expect((await sending).status).toBe(200);
    expect((await rate(ctx.alice, { messageId: generating.messageId, rating: 'up' })).status).toBe(200);
  });
});

describe('GET /api/v1/conversations/messages/feedback', () => {
  test('lists the caller’s feedback in a conversation, newest first, a page at a time; another user’s conversation is 404', async () => {
    const { conversationId, replyId } = await exchange(ctx.alice);
    const second = await ctx.h.http().post('/api/v1/conversations/messages').set(ctx.alice.auth).send({ conversationId, content: 'More' });
    const secondId = second.body.reply.messageId as string;
    await rate(ctx.alice, { messageId: replyId, rating: 'up' }).expect(200);
    const latest = await rate(ctx.alice, { messageId: secondId, rating: 'down', comment: 'Too short.' }).expect(200);
    const path = '/api/v1/conversations/messages/feedback';
    const page = await ctx.h.http().get(path).query({ conversationId, limit: 1 }).set(ctx.alice.auth);
    expect(page.status).toBe(200);
    expect(page.body.feedback).toEqual([latest.body.feedback]);
    const next = await ctx.h.http().get(path).query({ conversationId, cursor: page.body.nextCursor }).set(ctx.alice.auth);
    expect(next.body).toEqual({ feedback: [expect.objectContaining({ messageId: replyId, rating: 'up' })], nextCursor: null });
    expect((await ctx.h.http().get(path).query({ conversationId }).set(ctx.bob.auth)).status).toBe(404);
    expect((await ctx.h.http().get(path).set(ctx.alice.auth)).status).toBe(400);
    expect((await ctx.h.http().get(path).query({ conversationId, limit: 500 }).set(ctx.alice.auth)).status).toBe(400);
  });
});

describe('DELETE /api/v1/conversations/messages/feedback', () => {
  test('removes the caller’s feedback; none, another user’s or a missing id is 404 or 400', async () => {
    const { replyId } = await exchange(ctx.alice);
    expect((await rate(ctx.alice, { messageId: replyId, rating: 'down' })).status).toBe(200);
    const path = '/api/v1/conversations/messages/feedback';
    expect((await ctx.h.http().delete(path).query({ messageId: replyId }).set(ctx.bob.auth)).status).toBe(404);
    expect((await ctx.h.http().delete(path).set(ctx.alice.auth)).status).toBe(400);
    expect((await ctx.h.http().delete(path).query({ messageId: '' }).set(ctx.alice.auth)).status).toBe(400);
    const removed = await ctx.h.http().delete(path).set(ctx.alice.auth).send({ messageId: replyId });
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ messageId: replyId, deleted: true });
    const again = await ctx.h.http().delete(path).query({ messageId: replyId }).set(ctx.alice.auth);
    expect(again.status).toBe(404);
  });
});

describe('GET /api/v1/admin/feedback', () => {
  test('lists everyone’s feedback newest first with the reply’s model and usage, by rating, a page at a time; admins only', async () => {
    const a = await exchange(ctx.alice);
    const b = await exchange(ctx.bob);
    await rate(ctx.alice, { messageId: a.replyId, rating: 'up' }).expect(200);
    await rate(ctx.bob, { messageId: b.replyId, rating: 'down', reason: 'inaccurate', comment: 'Wrong year.' }).expect(200);
    const admin = await userNamed(ctx.h, ADMIN);
    const page = await ctx.h.http().get('/api/v1/admin/feedback').query({ limit: 1 }).set(admin.auth);
    expect(page.status).toBe(200);
    expect(page.body.feedback).toEqual([
      {
        feedbackId: expect.any(String),
        userId: ctx.bob.userId,
        conversationId: b.conversationId,
        messageId: b.replyId,
        rating: 'down',
        reason: 'inaccurate',
        comment: 'Wrong year.',
        model: 'test-model',
        // 10 × 100 + 5 × 200 millionths of a cent.
        usage: { inputTokens: 10, outputTokens: 5, costCents: 0.002 },
        createdAt: expect.any(Number),
        updatedAt: expect.any(Number),
      },
    ]);
    const next = await ctx.h.http().get('/api/v1/admin/feedback').query({ limit: 1, cursor: page.body.nextCursor }).set(admin.auth);
    expect(next.body.feedback[0]).toMatchObject({ userId: ctx.alice.userId, messageId: a.replyId, rating: 'up' });
    const ups = await ctx.h.http().get('/api/v1/admin/feedback').query({ rating: 'up', limit: 200 }).set(admin.auth);
    expect((ups.body.feedback as Array<{ rating: string }>).every((f) => f.rating === 'up')).toBe(true);
    expect((ups.body.feedback as Array<{ messageId: string }>).map((f) => f.messageId)).toContain(a.replyId);
    expect((ups.body.feedback as Array<{ messageId: string }>).map((f) => f.messageId)).not.toContain(b.replyId);

    expect((await ctx.h.http().get('/api/v1/admin/feedback').set(ctx.alice.auth)).status).toBe(403);
    expect((await ctx.h.http().get('/api/v1/admin/feedback').query({ rating: 'meh' }).set(admin.auth)).status).toBe(400);
    expect((await ctx.h.http().get('/api/v1/admin/feedback').query({ limit: 0 }).set(admin.auth)).status).toBe(400);
    expect((await ctx.h.http().get('/api/v1/admin/feedback').query({ cursor: '!' }).set(admin.auth)).status).toBe(400);
  });
});
