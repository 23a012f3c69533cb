import http from 'node:http';
import { type TestUser, useHarnessWith } from '../helpers/harness';
import { parseEvents, useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually } from '../helpers/receiver';

const servers = useFakeModelAndReceiver();
const env = () => ({
  MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
  MODEL_PROVIDER_MODELS: 'test-model,other-model',
});
const ctx = useHarnessWith(env, 'alice', 'bob');
beforeEach(() => {
  // Each reply names the last thing the user said, so a test can tell the branches apart.
  servers.model.behaviour = (n) => {
    const last = [...servers.model.requests[n]!.body.messages].reverse().find((m) => m.role === 'user');
    return { kind: 'reply', chunks: [`Re: ${String(last?.content)}`] };
  };
});

type Message = { messageId: string; parentId: string | null; siblingIds?: string[]; role: string; content: string; model: string | null };

/** A titled conversation (an untitled one would also ask the model for its title). */
async function conversation(user: TestUser): Promise<string> {
  const res = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({ title: 'Tree' });
  expect(res.status).toBe(200);
  expect(res.body.conversation.currentLeafId).toBeNull();
  return res.body.conversation.conversationId;
}

async function send(user: TestUser, body: Record<string, unknown>): Promise<{ message: Message; reply: Message }> {
  const res = await ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send(body);
  expect(res.status).toBe(200);
  return res.body;
}

async function regenerate(user: TestUser, body: Record<string, unknown>): Promise<{ message: Message; reply: Message }> {
  const res = await ctx.h.http().post('/api/v1/conversations/messages/regenerate').set(user.auth).send(body);
  expect(res.status).toBe(200);
  return res.body;
}

async function branch(user: TestUser, query: Record<string, unknown>): Promise<Message[]> {
  const res = await ctx.h.http().get('/api/v1/conversations/messages').query(query).set(user.auth);
  expect(res.status).toBe(200);
  return res.body.messages;
}

async function leafOf(user: TestUser, conversationId: string): Promise<string | null> {
  const res = await ctx.h.http().get('/api/v1/conversations').query({ conversationId }).set(user.auth);
  return res.body.conversation.currentLeafId;
}

/** The conversation messages of the last model request (the system prompt left out). */
const lastPrompt = () =>
  servers.model.requests
    .at(-1)!
    .body.messages.filter((m) => m.role !== 'system')
    .map((m) => `${m.role}: ${m.content}`);

describe('the message tree', () => {
  test('edits and regenerations are siblings; the branch shown is what GET answers and what the next prompt holds', async () => {
    const { alice } = ctx;
    const conversationId = await conversation(alice);
    const first = await send(alice, { conversationId, content: 'Plan the week.' });
    expect(first.message.parentId).toBeNull();
    expect(first.reply.parentId).toBe(first.message.messageId);
    expect(await leafOf(alice, conversationId)).toBe(first.reply.messageId);

    // Edited twice: siblings of the first message, each with a reply of its own.
    const edit1 = await send(alice, { conversationId, content: 'Plan the month.', parentId: null });
    const edit2 = await send(alice, { conversationId, content: 'Plan the year.', parentId: null });
    expect(lastPrompt()).toEqual(['user: Plan the year.']);
    // Regenerated twice: siblings of the last reply (the second with another model).
    const again1 = await regenerate(alice, { messageId: edit2.reply.messageId });
    const again2 = await regenerate(alice, { messageId: again1.reply.messageId, model: 'other-model' });
    expect(again2.message.messageId).toBe(edit2.message.messageId);
    expect(again2.reply).toMatchObject({ parentId: edit2.message.messageId, model: 'other-model', content: 'Re: Plan the year.' });
    expect(servers.model.requests.at(-1)!.body.model).toBe('other-model');
    expect(again1.reply.model).toBe('test-model');

    let shown = await branch(alice, { conversationId });
    expect(shown.map((m) => m.messageId)).toEqual([again2.reply.messageId, edit2.message.messageId]);
    const roots = [first, edit1, edit2].map((t) => t.message.messageId);
    expect(shown[1]!.siblingIds).toEqual(roots);
    expect(shown[0]!.siblingIds).toEqual([edit2.reply.messageId, again1.reply.messageId, again2.reply.messageId]);

    // Switching to the first message's branch: GET answers it, and the next message follows it.
    const switched = await ctx.h
      .http()
      .patch('/api/v1/conversations')
      .set(alice.auth)
      .send({ conversationId, currentLeafId: first.message.messageId });
    expect(switched.status).toBe(200);
    expect(switched.body.conversation.currentLeafId).toBe(first.reply.messageId);
    shown = await branch(alice, { conversationId });
    expect(shown.map((m) => m.content)).toEqual(['Re: Plan the week.', 'Plan the week.']);
    const next = await send(alice, { conversationId, content: 'And the weekend?' });
    expect(next.message.parentId).toBe(first.reply.messageId);
    expect(lastPrompt()).toEqual(['user: Plan the week.', 'assistant: Re: Plan the week.', 'user: And the weekend?']);

    // Another branch by its leaf, and the whole tree.
    const other = await branch(alice, { conversationId, leafId: edit1.message.messageId });
    expect(other.map((m) => m.content)).toEqual(['Re: Plan the month.', 'Plan the month.']);
    const tree = await branch(alice, { conversationId, view: 'tree' });
    expect(tree).toHaveLength(10);
    expect(tree.find((m) => m.messageId === again1.reply.messageId)?.siblingIds).toHaveLength(3);

    // A regeneration on a branch not shown: its prompt is that branch's path only.
    await regenerate(alice, { messageId: edit1.reply.messageId });
    expect(lastPrompt()).toEqual(['user: Plan the month.']);
    expect(await leafOf(alice, conversationId)).not.toBe(next.reply.messageId);
  });

  test('branch pages walk up the branch; a cursor continues it', async () => {
    const { alice } = ctx;
    const conversationId = await conversation(alice);
    for (const content of ['One', 'Two', 'Three']) await send(alice, { conversationId, content });
    await send(alice, { conversationId, content: 'Two, again', parentId: (await branch(alice, { conversationId }))[4]!.messageId });
    const page1 = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId, limit: 3 }).set(alice.auth);
    expect(page1.body.messages.map((m: Message) => m.content)).toEqual(['Re: Two, again', 'Two, again', 'Re: One']);
    const page2 = await ctx.h
      .http()
      .get('/api/v1/conversations/messages')
      .query({ conversationId, limit: 3, cursor: page1.body.nextCursor })
      .set(alice.auth);
    expect(page2.body).toEqual({ messages: [expect.objectContaining({ content: 'One' })], nextCursor: null });
  });

  test('a streamed regeneration streams the new reply', async () => {
    const { alice } = ctx;
    const conversationId = await conversation(alice);
    const first = await send(alice, { conversationId, content: 'Hello?' });
    const res = await ctx.h
      .http()
      .post('/api/v1/conversations/messages/regenerate/stream')
      .set(alice.auth)
      .send({ messageId: first.message.messageId })
      .buffer(true)
      .parse((r, callback) => {
        let text = '';
        r.on('data', (chunk: Buffer) => (text += chunk.toString()));
        r.on('end', () => callback(null, text));
      });
    expect(res.status).toBe(200);
    const events = parseEvents(res.body as string);
    expect(events[0]).toMatchObject({ event: 'message', data: { message: { messageId: first.message.messageId } } });
    const done = events.find((e) => e.event === 'done');
    expect(done?.data.message).toMatchObject({ parentId: first.message.messageId, content: 'Re: Hello?', status: 'complete' });
    expect((await branch(alice, { conversationId }))[0]!.siblingIds).toHaveLength(2);
  });

  test('a regeneration with Idempotency-Key is written once, however often it is retried', async () => {
    const { alice } = ctx;
    const conversationId = await conversation(alice);
    const first = await send(alice, { conversationId, content: 'Once?' });
    const retry = () =>
      ctx.h
        .http()
        .post('/api/v1/conversations/messages/regenerate')
        .set(alice.auth)
        .set('Idempotency-Key', 'regen-1')
        .send({ messageId: first.reply.messageId });
    const [a, b] = [await retry(), await retry()];
    expect(a.status).toBe(200);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(b.body.reply.messageId).toBe(a.body.reply.messageId);
    expect((await branch(alice, { conversationId }))[0]!.siblingIds).toHaveLength(2);
  });

  test('deleting a message deletes its subtree; the conversation shows the newest branch left', async () => {
    const { alice } = ctx;
    const conversationId = await conversation(alice);
    const first = await send(alice, { conversationId, content: 'A' });
    await send(alice, { conversationId, content: 'B' });
    const edit = await send(alice, { conversationId, content: 'A2', parentId: null });
    const res = await ctx.h.http().delete('/api/v1/conversations/messages').query({ messageId: edit.message.messageId }).set(alice.auth);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ messageId: edit.message.messageId, deleted: true, deletedCount: 2, currentLeafId: expect.any(String) });
    const shown = await branch(alice, { conversationId });
    expect(shown.map((m) => m.content)).toEqual(['Re: B', 'B', 'Re: A', 'A']);
    expect(res.body.currentLeafId).toBe(shown[0]!.messageId);

    // A reply deleted: the user message it answered ends the branch.
    const gone = await ctx.h.http().delete('/api/v1/conversations/messages').set(alice.auth).send({ messageId: shown[2]!.messageId });
    expect(gone.body).toMatchObject({ deletedCount: 3, currentLeafId: first.message.messageId });
    expect((await branch(alice, { conversationId })).map((m) => m.content)).toEqual(['A']);
    // And the next message follows it.
    const after = await send(alice, { conversationId, content: 'C' });
    expect(after.message.parentId).toBe(first.message.messageId);

    const all = await ctx.h.http().delete('/api/v1/conversations/messages').set(alice.auth).send({ messageId: first.message.messageId });
    expect(all.body).toMatchObject({ deletedCount: 3, currentLeafId: null });
    expect(await branch(alice, { conversationId })).toEqual([]);
  });

  test('a reply being written below a message keeps it from being deleted', async () => {
    const { alice } = ctx;
    const conversationId = await conversation(alice);
    const first = await send(alice, { conversationId, content: 'Start' });
    servers.model.behaviour = () => ({ kind: 'stall', chunks: ['Half'] });
    const asked = servers.model.requests.length;
    const body = JSON.stringify({ conversationId, content: 'Keep going' });
    const req = http.request(`${ctx.h.baseUrl}/api/v1/conversations/messages/stream`, {
      method: 'POST',
      headers: { ...alice.auth, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
    });
    req.on('error', () => undefined);
    req.end(body);
    await eventually(() => (servers.model.requests.length > asked ? true : undefined));
    const refused = await ctx.h
      .http()
      .delete('/api/v1/conversations/messages')
      .query({ messageId: first.message.messageId })
      .set(alice.auth);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('conflict');
    req.destroy();
    // Cancelled by the closed stream, the reply ends; then the subtree can go.
    await eventually(async () => {
      const res = await ctx.h.http().delete('/api/v1/conversations/messages').query({ messageId: first.message.messageId }).set(alice.auth);
      return res.status === 200 ? true : undefined;
    });
    expect(await branch(alice, { conversationId })).toEqual([]);
  });

  test("another user's conversation, message or branch is a 404 on every route", async () => {
    const { alice, bob } = ctx;
    const conversationId = await conversation(alice);
    const turn = await send(alice, { conversationId, content: 'Mine.' });
    const bobs = await conversation(bob);
    const http = ctx.h.http();
    const asked = servers.model.requests.length;
    const cases = [
      http.get('/api/v1/conversations/messages').query({ conversationId, leafId: turn.message.messageId }).set(bob.auth),
      http.get('/api/v1/conversations/messages').query({ conversationId: bobs, leafId: turn.message.messageId }).set(bob.auth),
      http.post('/api/v1/conversations/messages/regenerate').set(bob.auth).send({ messageId: turn.reply.messageId }),
      http.post('/api/v1/conversations/messages/regenerate/stream').set(bob.auth).send({ messageId: turn.reply.messageId }),
      http.delete('/api/v1/conversations/messages').query({ messageId: turn.message.messageId }).set(bob.auth),
      http.patch('/api/v1/conversations').set(bob.auth).send({ conversationId: bobs, currentLeafId: turn.message.messageId }),
      http
        .post('/api/v1/conversations/messages')
        .set(bob.auth)
        .send({ conversationId: bobs, content: 'Hi', parentId: turn.reply.messageId }),
      http
        .post('/api/v1/conversations/messages/stream')
        .set(bob.auth)
        .send({ conversationId: bobs, content: 'Hi', parentId: turn.reply.messageId }),
    ];
    for (const res of await Promise.all(cases)) {
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect(servers.model.requests.length).toBe(asked);
    expect(await branch(bob, { conversationId: bobs })).toEqual([]);
    expect(await leafOf(alice, conversationId)).toBe(turn.reply.messageId);
  });

  test('bad input is a 400 and changes nothing', async () => {
    const { alice } = ctx;
    const conversationId = await conversation(alice);
    const turn = await send(alice, { conversationId, content: 'Mine.' });
    const greeting = await ctx.h
      .http()
      .post('/api/v1/skills')
      .set(alice.auth)
      .send({ name: 'Helper', instructions: 'Help.' })
      .then((skill) =>
        ctx.h
          .http()
          .post('/api/v1/conversations/agent-greeting')
          .set(alice.auth)
          .send({ conversationId, skillId: skill.body.skill.skillId }),
      );
    expect(greeting.status).toBe(200);
    expect(greeting.body.message.parentId).toBe(turn.reply.messageId);
    const http = ctx.h.http();
    const asked = servers.model.requests.length;
    const cases = [
      http.post('/api/v1/conversations/messages/regenerate').set(alice.auth).send({}),
      http.post('/api/v1/conversations/messages/regenerate').set(alice.auth).send({ messageId: turn.reply.messageId, extra: 1 }),
      http.post('/api/v1/conversations/messages/regenerate').set(alice.auth).send({ messageId: greeting.body.message.messageId }),
      http
        .post('/api/v1/conversations/messages/regenerate')
        .set(alice.auth)
        .send({ messageId: turn.reply.messageId, model: 'no-such-model' }),
      http.get('/api/v1/conversations/messages').query({ conversationId, view: 'forest' }).set(alice.auth),
      http.get('/api/v1/conversations/messages').query({ conversationId, view: 'tree', leafId: turn.message.messageId }).set(alice.auth),
      http.delete('/api/v1/conversations/messages').set(alice.auth),
      http
        .delete('/api/v1/conversations/messages')
        .query({ messageId: turn.message.messageId })
        .set(alice.auth)
        .send({ messageId: turn.reply.messageId }),
      http.post('/api/v1/conversations/messages').set(alice.auth).send({ conversationId, content: 'Hi', parentId: '' }),
      http.patch('/api/v1/conversations').set(alice.auth).send({ conversationId, currentLeafId: null }),
    ];
    for (const res of await Promise.all(cases)) {
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    // A message of another conversation of the caller's is not one of this one.
    const other = await conversation(alice);
    const elsewhere = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(alice.auth)
      .send({ conversationId: other, content: 'Hi', parentId: turn.reply.messageId });
    expect(elsewhere.status).toBe(404);
    expect(elsewhere.body.details).toEqual([expect.objectContaining({ path: '/body/parentId' })]);
    expect(servers.model.requests.length).toBe(asked);
    expect((await branch(alice, { conversationId: conversationId, view: 'tree' })).length).toBe(3);
    expect(await branch(alice, { conversationId: other })).toEqual([]);
  });
});
