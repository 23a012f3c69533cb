import { sql } from 'kysely';
import { type TestUser, useHarnessWith } from '../helpers/harness';
import type { Behaviour } from '../helpers/openai-server';
import { useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually } from '../helpers/receiver';

const servers = useFakeModelAndReceiver();
const ctx = useHarnessWith(
  () => ({
    MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
    MODEL_PROVIDER_MODELS: 'test-model:100:200,other-model',
  }),
  'alice',
  'bob',
);

/** Whether the fake's n-th request asks for a title (its system message is the title instruction). */
const isTitleRequest = (n: number) => servers.model.requests[n]?.body.messages[0]?.content?.startsWith('Write a short title') ?? false;

/** Replies answer `Hello there.`; title requests as `title` says. */
function answerTitlesWith(title: () => Behaviour) {
  servers.model.behaviour = (n) => (isTitleRequest(n) ? title() : { kind: 'reply', chunks: ['Hello', ' there.'] });
}
beforeEach(() =>
  answerTitlesWith(() => ({ kind: 'reply', chunks: ['"Quarterly', ' plan"\nmore text'], usage: { prompt: 30, completion: 4 } })),
);

async function conversation(user: TestUser, body: Record<string, unknown> = {}): Promise<string> {
  const res = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send(body);
  expect(res.status).toBe(200);
  return res.body.conversation.conversationId;
}

const titleOf = async (user: TestUser, conversationId: string) =>
  (await ctx.h.http().get('/api/v1/conversations').query({ conversationId }).set(user.auth).expect(200)).body.conversation.title as string;

const send = (user: TestUser, conversationId: string, content: string) =>
  ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send({ conversationId, content });

const titleUsage = (replyId: string) =>
  sql<{ user_id: string; model: string; input_tokens: number; output_tokens: number; cost: string }>`
    select user_id, model, input_tokens, output_tokens, cost_micro_cents::text as cost
    from usage_records where kind = 'chat.title' and resource_id = ${`${replyId}:title`}`
    .execute(ctx.h.runtime.database.db)
    .then((r) => r.rows[0]);

describe('model-written titles', () => {
  test('after the first exchange the default model names the conversation, charged as chat.title; the reply did not wait', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    answerTitlesWith(() => ({
      kind: 'hold',
      until: held,
      then: { kind: 'reply', chunks: ['"Quarterly plan"'], usage: { prompt: 30, completion: 4 } },
    }));
    const conversationId = await conversation(ctx.alice);
    const content = 'Please draft the plan for the next quarter, with the budget and the hiring in it.';
    const res = await send(ctx.alice, conversationId, content);
    expect(res.status).toBe(200);
    // The answer came while the title request was still held: the cut title first.
    expect(await titleOf(ctx.alice, conversationId)).toBe(`${content.slice(0, 59)}…`);
    const request = await eventually(() => servers.model.requests.find((_, n) => isTitleRequest(n)));
    expect(request.body.model).toBe('test-model');
    expect(request.body.messages.at(-1)).toEqual({ role: 'user', content });
    release();
    await eventually(async () => ((await titleOf(ctx.alice, conversationId)) === 'Quarterly plan' ? true : undefined));
    // 30 × 100 + 4 × 200 millionths of a cent, charged to alice.
    expect(await titleUsage(res.body.reply.messageId)).toEqual({
      user_id: ctx.alice.userId,
      model: 'test-model',
      input_tokens: 30,
      output_tokens: 4,
      cost: '3800',
    });
    // A second exchange keeps the title and asks for none.
    const titleRequests = servers.model.requests.filter((_, n) => isTitleRequest(n)).length;
    expect((await send(ctx.alice, conversationId, 'And the risks?')).status).toBe(200);
    await ctx.h.runtime.services.chat.titles.idle();
    expect(servers.model.requests.filter((_, n) => isTitleRequest(n)).length).toBe(titleRequests);
    expect(await titleOf(ctx.alice, conversationId)).toBe('Quarterly plan');
  });

  test('the answer is cut to one line without quotes; a title the user gave or changed meanwhile stays', async () => {
    const named = await conversation(ctx.alice);
    const first = await send(ctx.alice, named, 'Plan the offsite');
    await eventually(async () => ((await titleOf(ctx.alice, named)) === 'Quarterly plan' ? true : undefined));
    expect(await titleUsage(first.body.reply.messageId)).toBeDefined();

    const given = await conversation(ctx.alice, { title: 'My own title' });
    const before = servers.model.requests.length;
    expect((await send(ctx.alice, given, 'Plan the offsite')).status).toBe(200);
    await ctx.h.runtime.services.chat.titles.idle();
    expect(servers.model.requests.slice(before).some((_, i) => isTitleRequest(before + i))).toBe(false);
    expect(await titleOf(ctx.alice, given)).toBe('My own title');

    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    answerTitlesWith(() => ({ kind: 'hold', until: held, then: { kind: 'reply', chunks: ['Offsite plan'] } }));
    const renamed = await conversation(ctx.alice);
    const reply = await send(ctx.alice, renamed, 'Plan the offsite');
    await ctx.h.http().patch('/api/v1/conversations').set(ctx.alice.auth).send({ conversationId: renamed, title: 'Renamed' }).expect(200);
    release();
    // Charged once the call ended, and the user's title kept.
    await eventually(() => titleUsage(reply.body.reply.messageId));
    await ctx.h.runtime.services.chat.titles.idle();
    expect(await titleOf(ctx.alice, renamed)).toBe('Renamed');
  });

  test('a failed title call keeps the cut title and the reply; autoTitles off asks for none', async () => {
    answerTitlesWith(() => ({ kind: 'error', status: 500, message: 'upstream overloaded' }));
    const failed = await conversation(ctx.bob);
    const res = await send(ctx.bob, failed, 'What is on the agenda?');
    expect(res.status).toBe(200);
    expect(res.body.reply).toMatchObject({ status: 'complete', content: 'Hello there.' });
    await ctx.h.runtime.services.chat.titles.idle();
    expect(await titleOf(ctx.bob, failed)).toBe('What is on the agenda?');
    expect(await titleUsage(res.body.reply.messageId)).toBeUndefined();

    answerTitlesWith(() => ({ kind: 'reply', chunks: ['Agenda'] }));
    const off = await ctx.h.http().patch('/api/v1/settings').set(ctx.bob.auth).send({ autoTitles: false });
    expect(off.status).toBe(200);
    expect(off.body.settings.autoTitles).toBe(false);
    expect(off.body.settings.inherited).not.toContain('autoTitles');
    expect((await ctx.h.http().patch('/api/v1/settings').set(ctx.bob.auth).send({ autoTitles: 'no' })).status).toBe(400);
    const before = servers.model.requests.length;
    const quiet = await conversation(ctx.bob);
    expect((await send(ctx.bob, quiet, 'What is on the agenda?')).status).toBe(200);
    await ctx.h.runtime.services.chat.titles.idle();
    expect(servers.model.requests.slice(before).filter((_, i) => isTitleRequest(before + i))).toEqual([]);
    expect(await titleOf(ctx.bob, quiet)).toBe('What is on the agenda?');
    // null follows the default (on) again.
    const reset = await ctx.h.http().patch('/api/v1/settings').set(ctx.bob.auth).send({ autoTitles: null });
    expect(reset.body.settings).toMatchObject({ autoTitles: true });
    expect(reset.body.settings.inherited).toContain('autoTitles');
  });
});

describe('model-written titles after an approval', () => {
  test('a first exchange that waited for an approval is named once it completes', async () => {
    let calls = 0;
    servers.model.behaviour = (n) => {
      if (isTitleRequest(n)) return { kind: 'reply', chunks: ['Launch notes'] };
      calls += 1;
      return calls === 1
        ? { kind: 'tool-calls', calls: [{ id: 'call_1', name: 'notes_create', arguments: '{"title":"Launch","content":"Soon"}' }] }
        : { kind: 'reply', chunks: ['Noted.'] };
    };
    const conversationId = await conversation(ctx.alice);
    const paused = await send(ctx.alice, conversationId, 'Note the launch');
    expect(paused.body.reply.status).toBe('awaiting_approval');
    await ctx.h.runtime.services.chat.titles.idle();
    expect(await titleOf(ctx.alice, conversationId)).toBe('Note the launch');
    const approvalId = paused.body.reply.parts.find((p: { type: string }) => p.type === 'tool-call').approvalId as string;
    const decided = await ctx.h.http().post('/api/v1/approvals/decide').set(ctx.alice.auth).send({ approvalId, decision: 'approve' });
    expect(decided.body.reply).toMatchObject({ status: 'complete', content: 'Noted.' });
    await eventually(async () => ((await titleOf(ctx.alice, conversationId)) === 'Launch notes' ? true : undefined));
    expect(await titleUsage(paused.body.reply.messageId)).toBeDefined();
  });
});

describe('model-written titles with the development model', () => {
  const dev = useHarnessWith(() => ({}), 'carol');

  test('its title is the first words of the first message', async () => {
    const created = await dev.h.http().post('/api/v1/conversations').set(dev.carol.auth).send({});
    const conversationId = created.body.conversation.conversationId as string;
    const res = await dev.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(dev.carol.auth)
      .send({ conversationId, content: 'Draft the plan for the quarter, with the numbers from the last review.' });
    expect(res.status).toBe(200);
    await eventually(async () => {
      const read = await dev.h.http().get('/api/v1/conversations').query({ conversationId }).set(dev.carol.auth);
      return read.body.conversation.title === 'Draft the plan for the quarter' ? true : undefined;
    });
  });
});
