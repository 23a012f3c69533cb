import { sql } from 'kysely';
import { type Harness, type TestUser, useHarnessWith } from '../helpers/harness';
import { eventually } from '../helpers/receiver';

const create = (h: Harness, user: TestUser, body: Record<string, unknown>) =>
  h.http().post('/api/v1/conversations').set(user.auth).send(body);

const read = (h: Harness, user: TestUser, conversationId: string) =>
  h.http().get('/api/v1/conversations').query({ conversationId }).set(user.auth);

const usageOf = (h: Harness, replyId: string) =>
  sql<{ kind: string }>`select kind from usage_records where resource_id in (${replyId}, ${`${replyId}:title`}) order by kind`
    .execute(h.runtime.database.db)
    .then((r) => r.rows.map((row) => row.kind));

describe('temporary conversations', () => {
  const ctx = useHarnessWith(() => ({}), 'alice', 'bob');

  test('are not listed, are read by id by their owner only, take messages, and cannot change `temporary`', async () => {
    const kept = await create(ctx.h, ctx.alice, { title: 'Kept' });
    expect(kept.body.conversation.temporary).toBe(false);
    const created = await create(ctx.h, ctx.alice, { temporary: true });
    expect(created.status).toBe(200);
    expect(created.body.conversation).toMatchObject({ title: '', temporary: true });
    const conversationId = created.body.conversation.conversationId as string;

    const sent = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Just between us' });
    expect(sent.status).toBe(200);
    const list = await ctx.h.http().get('/api/v1/conversations').query({ limit: 200 }).set(ctx.alice.auth);
    const listed = (list.body.conversations as Array<{ conversationId: string }>).map((c) => c.conversationId);
    expect(listed).toContain(kept.body.conversation.conversationId);
    expect(listed).not.toContain(conversationId);
    const archivedToo = await ctx.h.http().get('/api/v1/conversations').query({ archived: false }).set(ctx.alice.auth);
    expect((archivedToo.body.conversations as Array<{ conversationId: string }>).map((c) => c.conversationId)).not.toContain(
      conversationId,
    );

    expect((await read(ctx.h, ctx.alice, conversationId)).body.conversation).toMatchObject({ conversationId, temporary: true });
    expect((await read(ctx.h, ctx.bob, conversationId)).status).toBe(404);
    const bobMessages = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(ctx.bob.auth);
    expect(bobMessages.status).toBe(404);

    for (const temporary of [false, true]) {
      const patch = await ctx.h.http().patch('/api/v1/conversations').set(ctx.alice.auth).send({ conversationId, temporary });
      expect(patch.status).toBe(400);
    }
    expect((await create(ctx.h, ctx.alice, { temporary: 'yes' })).status).toBe(400);
    expect((await read(ctx.h, ctx.alice, conversationId)).body.conversation.temporary).toBe(true);
    await ctx.h.runtime.services.chat.titles.idle();
    // Its reply is charged; no title is written for a conversation no list shows (the cut one stays).
    expect(await usageOf(ctx.h, sent.body.reply.messageId)).toEqual(['chat.reply']);
    expect((await read(ctx.h, ctx.alice, conversationId)).body.conversation.title).toBe('Just between us');
  });
});

describe('the sweep of temporary conversations', () => {
  const ctx = useHarnessWith(() => ({ TEMPORARY_CONVERSATION_TTL: '1h', TEMPORARY_CONVERSATION_SWEEP_INTERVAL_MS: '50' }), 'carol');

  test('deletes a temporary conversation and its messages after its time to live; its usage records and other conversations stay', async () => {
    const kept = await create(ctx.h, ctx.carol, { title: 'Kept' });
    const idleKept = await create(ctx.h, ctx.carol, { title: 'Old but kept' });
    const created = await create(ctx.h, ctx.carol, { temporary: true, title: 'Scratch' });
    const conversationId = created.body.conversation.conversationId as string;
    const sent = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.carol.auth)
      .send({ conversationId, content: 'Scratch work' });
    expect(sent.status).toBe(200);
    // Still within its time to live: the sweeps leave it.
    await ctx.h.runtime.temporarySweep.runOnce();
    expect((await read(ctx.h, ctx.carol, conversationId)).status).toBe(200);
    // Its last activity, and that of an ordinary conversation, moved past the time to live.
    const ids = [conversationId, idleKept.body.conversation.conversationId as string];
    await sql`update conversations set updated_at = now() - interval '2 hours' where id in (${sql.join(ids)})`.execute(
      ctx.h.runtime.database.db,
    );
    await eventually(async () => ((await read(ctx.h, ctx.carol, conversationId)).status === 404 ? true : undefined));
    const messages = await sql<{ n: number }>`select count(*)::int as n from messages where conversation_id = ${conversationId}`.execute(
      ctx.h.runtime.database.db,
    );
    expect(messages.rows[0]?.n).toBe(0);
    expect(await usageOf(ctx.h, sent.body.reply.messageId)).toContain('chat.reply');
    expect((await read(ctx.h, ctx.carol, kept.body.conversation.conversationId)).status).toBe(200);
    expect((await read(ctx.h, ctx.carol, ids[1] as string)).status).toBe(200);
  });
});
