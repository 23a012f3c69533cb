import http from 'node:http';
import { sql } from 'kysely';
import { describeCrudContract } from '../helpers/crud-contract';
import { asListed, textBody, type TestUser, useHarnessWith } from '../helpers/harness';
import { parseEvents, useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually, subscribe, verify } from '../helpers/receiver';

const servers = useFakeModelAndReceiver();
// The reply timeout is the default (a minute): only the timeout test, on its own harness, waits on it.
const env = () => ({
  MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
  MODEL_PROVIDER_API_KEY: 'test-provider-key',
  MODEL_PROVIDER_MODELS: 'test-model:100:200,other-model',
  WEBHOOK_ALLOW_LOOPBACK: 'true',
  WEBHOOK_POLL_INTERVAL_MS: '20',
});
const ctx = useHarnessWith(env, 'alice', 'bob');
beforeEach(() => {
  servers.model.behaviour = () => ({ kind: 'reply', chunks: ['Hello', ' there.'] });
});

async function conversation(user: TestUser, body: Record<string, unknown> = {}): Promise<string> {
  const res = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send(body);
  expect(res.status).toBe(200);
  return res.body.conversation.conversationId;
}

async function messages(user: TestUser, conversationId: string) {
  const res = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(user.auth);
  expect(res.status).toBe(200);
  return res.body.messages as Array<Record<string, unknown>>;
}

const send = (user: TestUser, body: Record<string, unknown>) =>
  ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send(body);

describe('models', () => {
  test('lists the configured models, the default first, with prices; providers never show their key', async () => {
    const res = await ctx.h.http().get('/api/v1/models').set(ctx.alice.auth);
    expect(res.body.models).toEqual([
      {
        modelId: 'test-model',
        providerId: 'openai-compatible',
        name: 'test-model',
        default: true,
        inputCentsPerMillionTokens: 100,
        outputCentsPerMillionTokens: 200,
        connectionId: null,
        kinds: ['chat'],
        contextWindow: null,
        defaultFor: ['chat'],
      },
      {
        modelId: 'other-model',
        providerId: 'openai-compatible',
        name: 'other-model',
        default: false,
        inputCentsPerMillionTokens: 0,
        outputCentsPerMillionTokens: 0,
        connectionId: null,
        kinds: ['chat'],
        contextWindow: null,
        defaultFor: [],
      },
    ]);
    const providers = await ctx.h.http().get('/api/v1/model-providers').set(ctx.alice.auth);
    expect(providers.body.providers).toEqual([
      {
        providerId: 'openai-compatible',
        kind: 'openai-compatible',
        name: expect.any(String),
        baseUrl: servers.model.baseUrl,
        models: ['test-model', 'other-model'],
      },
    ]);
    expect(JSON.stringify(providers.body)).not.toContain('test-provider-key');
    expect((await ctx.h.http().get('/api/v1/models')).status).toBe(401);
    expect((await ctx.h.http().get('/api/v1/models').query({ limit: 5 }).set(ctx.alice.auth)).status).toBe(400);
  });
});

describe('conversations: the collection contract', () => {
  describeCrudContract(
    {
      path: '/api/v1/conversations',
      idField: 'conversationId',
      one: 'conversation',
      many: 'conversations',
      create: (n) => ({ title: `Conversation ${n}` }),
      update: { title: 'changed', archived: true, model: 'other-model' },
      invalidCreates: [{ title: 'x'.repeat(201) }, { model: 'no-such-model' }, { archived: true }, { projectId: '' }, { title: 5 }],
      invalidUpdates: [{ title: 'x'.repeat(201) }, { archived: 'yes' }, { omitId: true }, { model: 'no-such-model' }, { projectId: '' }],
    },
    () => ctx.h,
  );
});

describe('POST /api/v1/conversations/messages', () => {
  test('answers JSON with the stored message and reply; the prompt has the project instructions and relevant memory', async () => {
    const project = await ctx.h
      .http()
      .post('/api/v1/projects')
      .set(ctx.alice.auth)
      .send({ name: 'Lab', instructions: 'Always answer in French.' });
    await ctx.h
      .http()
      .post('/api/v1/memory')
      .set(ctx.alice.auth)
      .send({ kind: 'preference', content: 'Alice prefers metric units.' })
      .expect(200);
    await ctx.h.http().post('/api/v1/memory').set(ctx.alice.auth).send({ kind: 'fact', content: 'Alice plays the cello.' }).expect(200);
    const conversationId = await conversation(ctx.alice, { projectId: project.body.project.projectId });
    const res = await send(ctx.alice, { conversationId, content: 'Which units should the lab report use?' });

    expect(res.status).toBe(200);
    expect(res.body.message).toMatchObject({
      role: 'user',
      content: 'Which units should the lab report use?',
      status: 'complete',
      usage: null,
    });
    expect(res.body.reply).toMatchObject({
      role: 'assistant',
      content: 'Hello there.',
      status: 'complete',
      model: 'test-model',
      errorCode: null,
      usage: { inputTokens: 10, outputTokens: 5, costCents: 0.002 },
    });
    const request = servers.model.requests.at(-1)!;
    expect(request.authorization).toBe('Bearer test-provider-key');
    expect(request.body.model).toBe('test-model');
    const system = request.body.messages[0]!;
    expect(system.role).toBe('system');
    expect(system.content).toContain('Always answer in French.');
    expect(system.content).toContain('Alice prefers metric units.');
    expect(system.content).not.toContain('cello');
    expect(request.body.messages.at(-1)).toEqual({ role: 'user', content: 'Which units should the lab report use?' });

    expect(await messages(ctx.alice, conversationId)).toEqual([asListed(res.body.reply), asListed(res.body.message)]);
    // Named from the first message at once, then by the model (its answer to the title request).
    await ctx.h.runtime.services.chat.titles.idle();
    const read = await ctx.h.http().get('/api/v1/conversations').query({ conversationId }).set(ctx.alice.auth);
    expect(read.body.conversation.title).toBe('Hello there.');
    const usage = await sql<{ n: number; cost: number }>`
      select count(*)::int as n, sum(cost_micro_cents)::int as cost from usage_records where resource_id = ${res.body.reply.messageId}`.execute(
      ctx.h.runtime.database.db,
    );
    expect(usage.rows[0]).toEqual({ n: 1, cost: 2000 });

    const again = await send(ctx.alice, { conversationId, content: 'And for the appendix?', model: 'other-model' });
    expect({ status: again.status, body: again.body }).toMatchObject({ status: 200, body: { reply: { model: 'other-model' } } });
    const second = servers.model.requests.find((r) => r.body.messages.at(-1)?.content === 'And for the appendix?')!;
    expect(second.body.model).toBe('other-model');
    expect(second.body.messages.slice(1)).toEqual([
      { role: 'user', content: 'Which units should the lab report use?' },
      { role: 'assistant', content: 'Hello there.' },
      { role: 'user', content: 'And for the appendix?' },
    ]);
  });

  test('streams the reply as server-sent events, in order; the stored reply is their concatenation', async () => {
    servers.model.behaviour = () => ({ kind: 'reply', chunks: ['The ', 'plan ', 'is ', 'ready.'], usage: { prompt: 7, completion: 4 } });
    const conversationId = await conversation(ctx.alice);
    const res = await send(ctx.alice, { conversationId, content: 'Plan?', stream: true }).buffer(true).parse(textBody);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    const events = parseEvents(res.body as string);
    expect(events.map((e) => e.event)).toEqual(['message', 'delta', 'delta', 'delta', 'delta', 'done']);
    expect(events.filter((e) => e.event === 'delta').map((e) => e.data.text)).toEqual(['The ', 'plan ', 'is ', 'ready.']);
    const done = events.at(-1)!.data.message as Record<string, unknown>;
    expect(done).toMatchObject({ content: 'The plan is ready.', status: 'complete', usage: { inputTokens: 7, outputTokens: 4 } });
    expect(servers.model.requests.at(-1)!.body.stream).toBe(true);
    const stored = await messages(ctx.alice, conversationId);
    expect(stored[0]).toEqual(asListed(done));
    expect(stored[1]).toEqual(asListed(events[0]!.data.message));
  });

  test('a completed reply emits chat.completed, signed', async () => {
    const user = await ctx.h.newUser('hooks');
    const { secret } = await subscribe(ctx.h, user, `${servers.receiver.url}/completed`, ['chat.completed']);
    const conversationId = await conversation(user);
    const res = await send(user, { conversationId, content: 'Hi' });
    const request = await eventually(() => servers.receiver.received.find((r) => r.path === '/hook/completed'));
    expect(verify(secret, request)).toMatchObject({
      type: 'chat.completed',
      data: {
        conversationId,
        messageId: res.body.reply.messageId,
        model: 'test-model',
        content: 'Hello there.',
        usage: { inputTokens: 10, outputTokens: 5 },
      },
    });
  });

  test('a provider failure stores the reply as failed, answers 502 and emits chat.failed', async () => {
    servers.model.behaviour = () => ({ kind: 'error', status: 500, message: 'upstream overloaded' });
    const user = await ctx.h.newUser('fails');
    const { secret } = await subscribe(ctx.h, user, `${servers.receiver.url}/failed`, ['chat.failed']);
    const conversationId = await conversation(user);
    const res = await send(user, { conversationId, content: 'Hi' });
    expect(res.status).toBe(502);
    expect(res.body).toMatchObject({ code: 'model_provider_error', messageId: expect.any(String) });
    expect(res.body.error).toMatch(/upstream overloaded/);
    const [reply, message] = await messages(user, conversationId);
    expect(message).toMatchObject({ role: 'user', status: 'complete' });
    expect(reply).toMatchObject({ messageId: res.body.messageId, status: 'failed', errorCode: 'model_provider_error', usage: null });
    const request = await eventually(() => servers.receiver.received.find((r) => r.path === '/hook/failed'));
    expect(verify(secret, request)).toMatchObject({
      type: 'chat.failed',
      data: { conversationId, messageId: res.body.messageId, errorCode: 'model_provider_error' },
    });

    const streamed = await send(user, { conversationId, content: 'Again', stream: true }).buffer(true).parse(textBody);
    const events = parseEvents(streamed.body as string);
    expect(events.map((e) => e.event)).toEqual(['message', 'error']);
    expect(events[1]!.data).toMatchObject({ code: 'model_provider_error', message: { status: 'failed' } });
  });

  describe('with a reply timeout of ten seconds', () => {
    // Ten seconds, not less: the stalled stream's first chunk must reach the client before it.
    const timed = useHarnessWith(() => ({ ...env(), CHAT_TIMEOUT_MS: '10000' }), 'carol');

    test('no answer within the timeout: 504, the reply stored as failed', async () => {
      const { h, carol } = timed;
      servers.model.behaviour = () => ({ kind: 'hang' }); // never answers: only the timeout ends the reply
      const conversationId = (await h.http().post('/api/v1/conversations').set(carol.auth).send({})).body.conversation.conversationId;
      const abandonedBefore = servers.model.abandoned();
      const res = await h.http().post('/api/v1/conversations/messages').set(carol.auth).send({ conversationId, content: 'Hi' });
      expect(res.status).toBe(504);
      expect(res.body).toMatchObject({ code: 'model_provider_timeout', messageId: expect.any(String) });
      const [reply] = (await h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(carol.auth)).body.messages;
      expect(reply).toMatchObject({ status: 'failed', errorCode: 'model_provider_timeout' });
      await eventually(() => (servers.model.abandoned() > abandonedBefore ? true : undefined));

      servers.model.behaviour = () => ({ kind: 'stall', chunks: ['Half'] });
      const streamed = await h
        .http()
        .post('/api/v1/conversations/messages')
        .set(carol.auth)
        .send({ conversationId, content: 'Again', stream: true })
        .buffer(true)
        .parse(textBody);
      const events = parseEvents(streamed.body as string);
      expect(events.map((e) => e.event)).toEqual(['message', 'delta', 'error']);
      expect(events[2]!.data).toMatchObject({
        code: 'model_provider_timeout',
        message: { status: 'failed', content: 'Half', errorCode: 'model_provider_timeout' },
      });
    });
  });

  test('a client that disconnects mid-stream cancels the provider call; the partial reply is stored as cancelled', async () => {
    servers.model.behaviour = () => ({ kind: 'stall', chunks: ['Partial ', 'answer'] });
    const user = await ctx.h.newUser('leaves');
    const { secret } = await subscribe(ctx.h, user, `${servers.receiver.url}/cancelled`, ['chat.failed']);
    const conversationId = await conversation(user);
    const abandonedBefore = servers.model.abandoned();
    await new Promise<void>((resolve, reject) => {
      const request = http.request(`${ctx.h.baseUrl}/api/v1/conversations/messages`, {
        method: 'POST',
        headers: { ...user.auth, 'content-type': 'application/json' },
      });
      request.on('response', (response) => {
        let seen = '';
        response.on('data', (chunk: Buffer) => {
          seen += chunk.toString();
          if (seen.includes('answer')) {
            request.destroy();
            resolve();
          }
        });
      });
      request.on('error', (error) => (error.message.includes('socket hang up') ? resolve() : reject(error)));
      request.end(JSON.stringify({ conversationId, content: 'Tell me everything', stream: true }));
    });
    const reply = await eventually(async () => {
      const [latest] = await messages(user, conversationId);
      return latest?.status === 'failed' ? latest : undefined;
    });
    expect(reply).toMatchObject({ errorCode: 'cancelled', content: 'Partial answer' });
    await eventually(() => (servers.model.abandoned() > abandonedBefore ? true : undefined));
    const hook = await eventually(() => servers.receiver.received.find((r) => r.path === '/hook/cancelled'));
    expect(verify(secret, hook)).toMatchObject({ type: 'chat.failed', data: { errorCode: 'cancelled' } });
  });

  test('another user’s conversation is not found, and gets no message', async () => {
    const conversationId = await conversation(ctx.alice);
    const requests = servers.model.requests.length;
    for (const stream of [false, true]) {
      const res = await send(ctx.bob, { conversationId, content: 'Hi', stream });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect((await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(ctx.bob.auth)).status).toBe(404);
    expect(await messages(ctx.alice, conversationId)).toEqual([]);
    expect(servers.model.requests).toHaveLength(requests);
  });

  test('bad input is a 400, an archived conversation a 409, and nothing is stored or sent', async () => {
    const conversationId = await conversation(ctx.alice);
    const requests = servers.model.requests.length;
    for (const body of [
      { conversationId },
      { conversationId, content: '' },
      { conversationId, content: '   ' },
      { conversationId, content: 'x'.repeat(100_001) },
      { conversationId, content: 'Hi', stream: 'yes' },
      { conversationId, content: 'Hi', model: 'no-such-model' },
      { content: 'Hi' },
      { conversationId, content: 'Hi', temperature: 2 },
    ]) {
      const res = await send(ctx.alice, body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    await ctx.h.http().patch('/api/v1/conversations').set(ctx.alice.auth).send({ conversationId, archived: true });
    expect((await send(ctx.alice, { conversationId, content: 'Hi' })).status).toBe(409);
    expect(await messages(ctx.alice, conversationId)).toEqual([]);
    expect(servers.model.requests).toHaveLength(requests);
    expect((await ctx.h.http().get('/api/v1/conversations/messages').set(ctx.alice.auth)).status).toBe(400);
  });

  test('Idempotency-Key replays a JSON reply and posts nothing; with stream it is refused', async () => {
    const conversationId = await conversation(ctx.alice);
    const requests = servers.model.requests.length;
    const first = await send(ctx.alice, { conversationId, content: 'Once' }).set('Idempotency-Key', 'chat-once');
    // The reply's call and the conversation's title.
    await ctx.h.runtime.services.chat.titles.idle();
    expect(servers.model.requests).toHaveLength(requests + 2);
    const again = await send(ctx.alice, { conversationId, content: 'Once' }).set('Idempotency-Key', 'chat-once');
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(servers.model.requests).toHaveLength(requests + 2);
    const streamed = await send(ctx.alice, { conversationId, content: 'Twice', stream: true }).set('Idempotency-Key', 'chat-stream');
    expect(streamed.status).toBe(400);
    expect(await messages(ctx.alice, conversationId)).toHaveLength(2);
  });

  test('messages are paged, newest first', async () => {
    const conversationId = await conversation(ctx.alice);
    await send(ctx.alice, { conversationId, content: 'One' });
    await send(ctx.alice, { conversationId, content: 'Two' });
    const first = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId, limit: 3 }).set(ctx.alice.auth);
    expect(first.body.messages.map((m: { content: string }) => m.content)).toEqual(['Hello there.', 'Two', 'Hello there.']);
    const second = await ctx.h
      .http()
      .get('/api/v1/conversations/messages')
      .query({ conversationId, limit: 3, cursor: first.body.nextCursor })
      .set(ctx.alice.auth);
    expect(second.body.messages.map((m: { content: string }) => m.content)).toEqual(['One']);
    expect(second.body.nextCursor).toBeNull();
  });
});

describe('POST /api/v1/conversations/agent-greeting', () => {
  test('posts the agent’s greeting once per conversation and agent', async () => {
    const skill = await ctx.h.http().post('/api/v1/skills').set(ctx.alice.auth).send({ name: 'Researcher', greeting: 'Send me a paper.' });
    const quiet = await ctx.h.http().post('/api/v1/skills').set(ctx.alice.auth).send({ name: 'Editor', description: 'I tighten prose.' });
    const conversationId = await conversation(ctx.alice);
    const greet = (agentId: string) =>
      ctx.h.http().post('/api/v1/conversations/agent-greeting').set(ctx.alice.auth).send({ conversationId, agentId });

    const first = await greet(skill.body.skill.skillId);
    expect(first.status).toBe(200);
    expect(first.body.message).toMatchObject({
      role: 'assistant',
      content: 'Send me a paper.',
      agentId: skill.body.skill.skillId,
      status: 'complete',
    });
    const again = await greet(skill.body.skill.skillId);
    expect(again.body.message).toEqual(first.body.message);
    const [a, b] = await Promise.all([greet(quiet.body.skill.skillId), greet(quiet.body.skill.skillId)]);
    expect(a.body.message.messageId).toBe(b.body.message.messageId);
    expect(a.body.message.content).toBe("Hi, I'm Editor. I tighten prose.");
    expect(await messages(ctx.alice, conversationId)).toHaveLength(2);
  });

  test('skillId names the skill as 1.0.0’s agentId did, and the message carries both names', async () => {
    const skill = await ctx.h.http().post('/api/v1/skills').set(ctx.alice.auth).send({ name: 'Reviewer', greeting: 'Paste a draft.' });
    const skillId = skill.body.skill.skillId as string;
    const conversationId = await conversation(ctx.alice);
    const post = (body: Record<string, unknown>) =>
      ctx.h.http().post('/api/v1/conversations/agent-greeting').set(ctx.alice.auth).send(body);
    const bySkill = await post({ conversationId, skillId });
    expect(bySkill.status).toBe(200);
    expect(bySkill.body.message).toMatchObject({ content: 'Paste a draft.', skillId, agentId: skillId });
    // The same greeting, whichever name asked for it.
    expect((await post({ conversationId, agentId: skillId })).body.message).toEqual(bySkill.body.message);
    const both = await post({ conversationId, skillId, agentId: skillId });
    expect(both.status).toBe(400);
    expect(JSON.stringify(both.body)).toContain('skillId');
    const missing = await post({ conversationId, skillId: '01936d2e-7b1a-7c3e-9f00-000000000000' });
    expect(missing.status).toBe(404);
    expect(JSON.stringify(missing.body)).toContain('skillId');
    expect(await messages(ctx.alice, conversationId)).toHaveLength(1);
  });

  test('another user’s conversation or skill is not found; bad input is a 400; nothing is posted', async () => {
    const skill = await ctx.h
      .http()
      .post('/api/v1/skills')
      .set(ctx.alice.auth)
      .send({ name: `Agent ${Date.now()}` });
    const bobSkill = await ctx.h.http().post('/api/v1/skills').set(ctx.bob.auth).send({ name: 'Bob agent' });
    const conversationId = await conversation(ctx.alice);
    const post = (user: TestUser, body: Record<string, unknown>) =>
      ctx.h.http().post('/api/v1/conversations/agent-greeting').set(user.auth).send(body);
    expect((await post(ctx.bob, { conversationId, agentId: bobSkill.body.skill.skillId })).status).toBe(404);
    expect((await post(ctx.alice, { conversationId, agentId: bobSkill.body.skill.skillId })).status).toBe(404);
    for (const body of [
      { conversationId },
      { agentId: skill.body.skill.skillId },
      { conversationId, agentId: '' },
      { conversationId, agentId: skill.body.skill.skillId, extra: 1 },
    ]) {
      expect((await post(ctx.alice, body)).status).toBe(400);
    }
    expect(
      (await ctx.h.http().post('/api/v1/conversations/agent-greeting').send({ conversationId, agentId: skill.body.skill.skillId })).status,
    ).toBe(401);
    expect(await messages(ctx.alice, conversationId)).toEqual([]);
  });
});
