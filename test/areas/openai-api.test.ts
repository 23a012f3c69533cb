import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { sql } from 'kysely';
import { type TestUser, useHarnessWith, userNamed } from '../helpers/harness';
import { type FakeModelServer, scriptAnswers, startFakeModel } from '../helpers/openai-server';

// The OpenAI-compatible API (/v1) driven by the official `openai` client: the deployment's
// provider (a local OpenAI-format server, priced) and a user's own connection (another one), the
// model policy, budgets and the usage ledger, and OpenAI's error shape.
const ROOT = `root-${randomUUID()}`;
const CONNECTION_KEY = 'sk-conn-OPENAI-API-6f1e2d3c4b5a';
let deployment: FakeModelServer;
let own: FakeModelServer;
beforeAll(async () => {
  [deployment, own] = await Promise.all([startFakeModel(), startFakeModel()]);
  own.catalogue = { models: ['conn-chat', 'conn-embed-small'], embeddingDimensions: 8, requiredKey: CONNECTION_KEY };
});
afterAll(async () => {
  await Promise.all([deployment?.close(), own?.close()]);
});

const ctx = useHarnessWith(
  () => ({
    BOOTSTRAP_ADMIN_USER_IDS: ROOT,
    OUTBOUND_ALLOW_LOOPBACK: 'true',
    MODEL_PROVIDER_BASE_URL: deployment.baseUrl,
    // 100 cents per million input tokens, 200 per million output tokens; the second is free.
    MODEL_PROVIDER_MODELS: 'test-model:100:200,blockable-model',
    // 100 cents a month for everyone.
    ENTITLEMENT_MONTHLY_BUDGET_CENTS: '100',
    CHAT_TIMEOUT_MS: '2000',
    CAPABILITY_CACHE_MS: '0',
  }),
  'alice',
  'bob',
);
const db = () => ctx.h.runtime.database.db;
const admin = () => userNamed(ctx.h, ROOT);

/** The official client, as an OpenAI user points it at the service: base URL `<service>/v1`, the bearer token as the key. */
const client = (user: TestUser | string) =>
  new OpenAI({ baseURL: `${ctx.h.baseUrl}/v1`, apiKey: typeof user === 'string' ? user : user.token, maxRetries: 0 });

/** The error the client threw (it throws for every non-2xx answer). */
async function refused(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call;
  } catch (error) {
    if (error instanceof OpenAI.APIError) return error;
    throw error;
  }
  throw new Error('the call succeeded');
}

/** Alice's tested connection to `own` (kind openai_compatible): its id. */
let connectionId = '';
async function aliceConnection(): Promise<string> {
  if (connectionId) return connectionId;
  const created = await ctx.h.http().post('/api/v1/model-providers').set(ctx.alice.auth).send({
    kind: 'openai_compatible',
    name: 'My server',
    baseUrl: own.baseUrl,
    apiKey: CONNECTION_KEY,
  });
  expect(created.status).toBe(200);
  connectionId = created.body.connection.connectionId as string;
  const tested = await ctx.h.http().post('/api/v1/model-providers/test').set(ctx.alice.auth).send({ connectionId });
  expect(tested.body.connection).toMatchObject({ status: 'active' });
  return connectionId;
}

/** The usage ledger's row of a completion (by its id). */
async function usageRecord(resourceId: string) {
  const rows = await sql<{
    kind: string;
    model: string;
    connection_id: string | null;
    input_tokens: number;
    output_tokens: number;
    cost: number;
  }>`
    select kind, model, connection_id, input_tokens::int, output_tokens::int, cost_micro_cents::int as cost
    from usage_records where resource_id = ${resourceId}`.execute(db());
  return rows.rows;
}

describe('GET /v1/models', () => {
  test('lists the deployment’s chat models, its embeddings model and the caller’s own connection’s models', async () => {
    const id = await aliceConnection();
    const models = await client(ctx.alice).models.list();
    expect(models.data.map((m) => m.id)).toEqual([
      'test-model',
      'blockable-model',
      'builtin-hashing',
      `${id}/conn-chat`,
      `${id}/conn-embed-small`,
    ]);
    expect(models.data[0]).toEqual({ id: 'test-model', object: 'model', created: 0, owned_by: 'openai-compatible' });
    expect(models.data.at(-1)).toMatchObject({ owned_by: 'openai_compatible' });
    // Bob sees none of Alice's.
    expect((await client(ctx.bob).models.list()).data.map((m) => m.id)).toEqual(['test-model', 'blockable-model', 'builtin-hashing']);
  });
});

describe('POST /v1/chat/completions through the deployment’s provider', () => {
  test('a whole completion: the messages passed on, the answer and usage in OpenAI’s shape, charged as chat’s', async () => {
    scriptAnswers(deployment, { kind: 'reply', chunks: ['Paris', '.'], usage: { prompt: 1000, completion: 500 } });
    const first = deployment.requests.length;
    const completion = await client(ctx.alice).chat.completions.create({
      model: 'test-model',
      messages: [
        { role: 'developer', content: 'Be terse.' },
        { role: 'user', content: [{ type: 'text', text: 'Capital of France?' }] },
      ],
      max_tokens: 50,
      temperature: 0.2,
      stop: ['END'],
      user: 'someone',
    });
    expect(completion).toMatchObject({
      object: 'chat.completion',
      model: 'test-model',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Paris.', refusal: null }, finish_reason: 'stop', logprobs: null }],
      usage: { prompt_tokens: 1000, completion_tokens: 500, total_tokens: 1500 },
    });
    expect(completion.id).toMatch(/^chatcmpl-[0-9a-f-]{36}$/);
    const sent = deployment.requests[first]!.body as unknown as Record<string, unknown>;
    expect(sent).toMatchObject({ model: 'test-model', max_tokens: 50, temperature: 0.2, stop: ['END'] });
    expect(sent.messages).toEqual([
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'Capital of France?' },
    ]);
    // 1000 × 100 + 500 × 200 millionths of a cent.
    expect(await usageRecord(completion.id)).toEqual([
      { kind: 'openai.chat', model: 'test-model', connection_id: null, input_tokens: 1000, output_tokens: 500, cost: 200_000 },
    ]);
  });

  test('a streamed completion with a tool call: tool_calls deltas, finish_reason tool_calls, usage in the last chunk; the tool result goes back', async () => {
    const tools: OpenAI.Chat.Completions.ChatCompletionFunctionTool[] = [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'The weather of a city.',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      },
    ];
    scriptAnswers(
      deployment,
      { kind: 'tool-calls', chunks: ['Let me check. '], calls: [{ id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' }] },
      { kind: 'reply', chunks: ['It is ', 'sunny.'] },
    );
    const first = deployment.requests.length;
    const stream = await client(ctx.alice).chat.completions.create({
      model: 'test-model',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools,
      tool_choice: 'auto',
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant', content: '' });
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe('Let me check. ');
    const calls = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(calls).toEqual([
      { index: 0, id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
    ]);
    expect(chunks.at(-2)!.choices[0]).toMatchObject({ delta: {}, finish_reason: 'tool_calls' });
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    // The client's tool went to the model as a definition, with its choice; the service ran nothing.
    const asked = deployment.requests[first]!.body;
    expect(asked.tools).toEqual([
      { type: 'function', function: expect.objectContaining({ name: 'get_weather', parameters: tools[0]!.function.parameters }) },
    ]);

    // The client runs it and sends the result: the assistant's call and the tool message reach the model.
    const answer = await client(ctx.alice).chat.completions.create({
      model: 'test-model',
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_w1', content: 'Sunny, 21 °C.' },
      ],
      tools,
    });
    expect(answer.choices[0]!.message.content).toBe('It is sunny.');
    const followUp = deployment.requests[first + 1]!.body;
    expect(followUp.messages.slice(1)).toEqual([
      expect.objectContaining({
        role: 'assistant',
        tool_calls: [{ id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      }),
      expect.objectContaining({ role: 'tool', tool_call_id: 'call_w1', content: 'Sunny, 21 °C.' }),
    ]);
  });

  test('the raw stream is exactly OpenAI’s: data lines, [DONE] last', async () => {
    scriptAnswers(deployment, { kind: 'reply', chunks: ['Hi', '!'] });
    const res = await fetch(`${ctx.h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ctx.alice.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'Hello' }], stream: true }),
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const body = await res.text();
    const events = body.split('\n\n').filter((e) => e !== '');
    expect(events.every((e) => e.startsWith('data: ') && !e.includes('\n'))).toBe(true);
    expect(events.at(-1)).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as Record<string, unknown>);
    expect(chunks.map((c) => (c.choices as Array<{ delta: unknown }>)[0]!.delta)).toEqual([
      { role: 'assistant', content: '' },
      { content: 'Hi' },
      { content: '!' },
      {},
    ]);
    expect(chunks.every((c) => !('usage' in c))).toBe(true);
  });

  test('a client that disconnects mid-stream stops the model call and is charged for what was produced', async () => {
    scriptAnswers(deployment, { kind: 'stall', chunks: ['Once', ' upon', ' a time'] });
    const abandoned = deployment.abandoned();
    const abort = new AbortController();
    const stream = await client(ctx.alice).chat.completions.create(
      { model: 'test-model', messages: [{ role: 'user', content: 'Tell me a long story.' }], stream: true },
      { signal: abort.signal },
    );
    let id = '';
    let text = '';
    try {
      for await (const chunk of stream) {
        id = chunk.id;
        text += chunk.choices[0]?.delta.content ?? '';
        if (text === 'Once upon a time') abort.abort();
      }
    } catch {
      // The client reports its own abort (or just stops).
    }
    expect(text).toBe('Once upon a time');
    await eventuallyTrue(async () => deployment.abandoned() > abandoned && (await usageRecord(id)).length === 1);
    const [record] = await usageRecord(id);
    // Estimated as chat estimates a stopped reply: about four characters a token.
    expect(record).toMatchObject({ kind: 'openai.chat', model: 'test-model', output_tokens: Math.ceil('Once upon a time'.length / 4) });
    expect(record!.input_tokens).toBeGreaterThan(0);
  });

  test('the provider’s failure is 502 and its timeout 504, in OpenAI’s shape', async () => {
    scriptAnswers(deployment, { kind: 'error', status: 503, message: 'upstream overloaded' });
    const failed = await refused(
      client(ctx.alice).chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Hi' }] }),
    );
    expect(failed.status).toBe(502);
    expect(failed.error).toEqual({
      message: 'The model provider answered 503: upstream overloaded',
      type: 'server_error',
      param: null,
      code: 'model_provider_error',
    });
    scriptAnswers(deployment, { kind: 'hang' });
    const late = await refused(
      client(ctx.alice).chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
    );
    expect(late.status).toBe(504);
    expect(late.error).toMatchObject({ type: 'server_error', code: 'model_provider_timeout' });
  });
});

/** Polls `check` until it holds (5 s at most). */
async function eventuallyTrue(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i += 1) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('never came true');
}

describe('through a user’s own connection', () => {
  test('chat (whole and streamed) goes to the connection with its key, recorded with it at cost 0; embeddings too', async () => {
    const id = await aliceConnection();
    scriptAnswers(
      own,
      { kind: 'reply', chunks: ['From ', 'my server.'], usage: { prompt: 7, completion: 3 } },
      { kind: 'reply', chunks: ['Streamed.'] },
    );
    const first = own.requests.length;
    const completion = await client(ctx.alice).chat.completions.create({
      model: `${id}/conn-chat`,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    expect(completion.choices[0]!.message.content).toBe('From my server.');
    expect(completion.model).toBe(`${id}/conn-chat`);
    expect(own.requests[first]).toMatchObject({ body: { model: 'conn-chat' }, authorization: `Bearer ${CONNECTION_KEY}` });
    expect(await usageRecord(completion.id)).toEqual([
      { kind: 'openai.chat', model: `${id}/conn-chat`, connection_id: id, input_tokens: 7, output_tokens: 3, cost: 0 },
    ]);
    const stream = await client(ctx.alice).chat.completions.create({
      model: `${id}/conn-chat`,
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('Streamed.');

    const embedded = await client(ctx.alice).embeddings.create({
      model: `${id}/conn-embed-small`,
      input: ['one two', 'three'],
      encoding_format: 'float',
    });
    expect(embedded.data.map((d) => d.embedding.length)).toEqual([8, 8]);
    expect(embedded.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
    expect(own.embeddings.at(-1)).toMatchObject({
      model: 'conn-embed-small',
      input: ['one two', 'three'],
      authorization: `Bearer ${CONNECTION_KEY}`,
    });
  });

  test('another user cannot use it: 404 model_not_found', async () => {
    const id = await aliceConnection();
    const error = await refused(
      client(ctx.bob).chat.completions.create({ model: `${id}/conn-chat`, messages: [{ role: 'user', content: 'Hi' }] }),
    );
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error.error).toEqual({
      message: `The model "${id}/conn-chat" does not exist or you do not have access to it: model: must be one of the available models: test-model, blockable-model.`,
      type: 'invalid_request_error',
      param: 'model',
      code: 'model_not_found',
    });
    const embedding = await refused(client(ctx.bob).embeddings.create({ model: `${id}/conn-embed-small`, input: 'x' }));
    expect(embedding.status).toBe(404);
  });
});

describe('POST /v1/embeddings with the deployment’s embedder', () => {
  test('float and base64 (the client’s default, decoded by it) give the same unit vectors; dimensions is taken', async () => {
    const float = await client(ctx.alice).embeddings.create({
      model: 'builtin-hashing',
      input: 'The launch is on Monday.',
      encoding_format: 'float',
    });
    expect(float).toMatchObject({ object: 'list', model: 'builtin-hashing', usage: { prompt_tokens: 5, total_tokens: 5 } });
    const vector = float.data[0]!.embedding;
    expect(vector).toHaveLength(256);
    expect(Math.hypot(...vector)).toBeCloseTo(1, 5);
    // The client asks for base64 when no format is given, and decodes it to floats.
    const decoded = await client(ctx.alice).embeddings.create({ model: 'builtin-hashing', input: ['The launch is on Monday.'] });
    decoded.data[0]!.embedding.forEach((v, i) => expect(v).toBeCloseTo(vector[i]!, 6));
    const raw = await ctx.h
      .http()
      .post('/v1/embeddings')
      .set(ctx.alice.auth)
      .send({ model: 'builtin-hashing', input: 'x y', encoding_format: 'base64', dimensions: 64 });
    expect(raw.status).toBe(200);
    expect(Buffer.from(raw.body.data[0].embedding as string, 'base64').byteLength).toBe(64 * 4);
    const ids = (
      await sql<{
        n: number;
      }>`select count(*)::int as n from usage_records where kind = 'openai.embeddings' and user_id = ${ctx.alice.userId}`.execute(db())
    ).rows[0]!.n;
    expect(ids).toBeGreaterThanOrEqual(3);
  });

  test('refused: token arrays, an unknown model, a chat model', async () => {
    const id = await aliceConnection();
    const tokens = await ctx.h
      .http()
      .post('/v1/embeddings')
      .set(ctx.alice.auth)
      .send({ model: 'builtin-hashing', input: [1, 2, 3] });
    expect(tokens.status).toBe(400);
    expect(tokens.body.error).toMatchObject({ type: 'invalid_request_error', param: 'input', code: 'invalid_request' });
    expect((await refused(client(ctx.alice).embeddings.create({ model: 'nope', input: 'x' }))).status).toBe(404);
    const chat = await refused(client(ctx.alice).embeddings.create({ model: `${id}/conn-chat`, input: 'x' }));
    expect(chat.error).toMatchObject({ param: 'model', code: 'invalid_request' });
    expect((await refused(client(ctx.alice).embeddings.create({ model: 'test-model', input: 'x' }))).status).toBe(400);
  });
});

describe('budgets and the model policy', () => {
  test('a spent budget is 402 insufficient_quota before the model is called; the user’s own connection still answers', async () => {
    const spender = await ctx.h.newUser('spender');
    // 1,000,000 input tokens at 100 cents a million: the month's 100 cents, spent.
    scriptAnswers(deployment, { kind: 'reply', chunks: ['Costly.'], usage: { prompt: 1_000_000, completion: 0 } });
    await client(spender).chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Spend it.' }] });
    const asked = deployment.requests.length;
    const error = await refused(
      client(spender).chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'More.' }], stream: true }),
    );
    expect(error.status).toBe(402);
    expect(error.error).toEqual({
      message: 'The budget for this period is spent.',
      type: 'insufficient_quota',
      param: null,
      code: 'budget_exhausted',
    });
    expect(deployment.requests.length).toBe(asked);
    // Free models of the deployment are refused too (the budget is the deployment's); the user's own key is not.
    expect(
      (await refused(client(spender).chat.completions.create({ model: 'blockable-model', messages: [{ role: 'user', content: 'x' }] })))
        .status,
    ).toBe(402);
    const created = await ctx.h
      .http()
      .post('/api/v1/model-providers')
      .set(spender.auth)
      .send({ kind: 'openai_compatible', name: 'Mine', baseUrl: own.baseUrl, apiKey: CONNECTION_KEY, enabledModels: ['conn-chat'] });
    expect(created.status).toBe(200);
    const mine = `${created.body.connection.connectionId as string}/conn-chat`;
    const answered = await client(spender).chat.completions.create({ model: mine, messages: [{ role: 'user', content: 'On my key.' }] });
    expect(answered.choices[0]!.finish_reason).toBe('stop');
  });

  test('a model the policy blocks is 404 model_not_found and no longer listed', async () => {
    const blocked = await ctx.h
      .http()
      .patch('/api/v1/admin/model-policy')
      .set((await admin()).auth)
      .send({ block: ['blockable-model', 'builtin-hashing'] });
    expect(blocked.status).toBe(200);
    try {
      const error = await refused(
        client(ctx.alice).chat.completions.create({ model: 'blockable-model', messages: [{ role: 'user', content: 'x' }] }),
      );
      expect(error.status).toBe(404);
      expect(error.error).toMatchObject({ param: 'model', code: 'model_not_found' });
      expect(error.message).toMatch(/model policy blocks this model/);
      const listed = (await client(ctx.alice).models.list()).data.map((m) => m.id);
      expect(listed).not.toContain('blockable-model');
      expect(listed).not.toContain('builtin-hashing');
      expect((await refused(client(ctx.alice).embeddings.create({ model: 'builtin-hashing', input: 'x' }))).status).toBe(404);
    } finally {
      await ctx.h
        .http()
        .patch('/api/v1/admin/model-policy')
        .set((await admin()).auth)
        .send({ block: [] })
        .expect(200);
    }
  });
});

describe('refusals in OpenAI’s shape', () => {
  const chat = (body: Record<string, unknown>) => ctx.h.http().post('/v1/chat/completions').set(ctx.alice.auth).send(body);
  const hello = [{ role: 'user', content: 'Hello' }];

  test('bad inputs are 400 invalid_request_error naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string | null]> = [
      [{ model: 'test-model', messages: hello, n: 2 }, 'n'],
      [{ model: 'test-model', messages: hello, logit_bias: { '50256': -100 } }, 'logit_bias'],
      [{ model: 'test-model', messages: [] }, 'messages'],
      [{ model: 'test-model', messages: [{ role: 'function', name: 'f', content: 'x' }] }, 'messages[0]'],
      [{ model: 'test-model', messages: [{ role: 'tool', tool_call_id: 'call_none', content: 'x' }] }, 'messages[0].tool_call_id'],
      [
        {
          model: 'test-model',
          messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }],
        },
        // test-model reads no images (chat's rule for a model's kinds).
        'messages',
      ],
      [
        { model: 'test-model', messages: hello, tool_choice: { type: 'function', function: { name: 'nope' } } },
        'tool_choice.function.name',
      ],
      [{ model: 'builtin-hashing', messages: hello }, 'model'],
    ];
    for (const [body, param] of cases) {
      const res = await chat(body);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(Object.keys(res.body)).toEqual(['error']);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request', message: expect.any(String) });
      if (param !== null) expect({ body, param: res.body.error.param }).toEqual({ body, param });
    }
    const viaClient = await refused(
      client(ctx.alice).chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'x' }], n: 3 }),
    );
    expect(viaClient).toBeInstanceOf(OpenAI.BadRequestError);
    expect(viaClient.message).toMatch(/n: must be 1/);
  });

  test('an unknown model is 404 model_not_found; an unknown route under /v1 is 404 in OpenAI’s shape too', async () => {
    const error = await refused(client(ctx.alice).chat.completions.create({ model: 'gpt-9', messages: [{ role: 'user', content: 'x' }] }));
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error.error).toMatchObject({ type: 'invalid_request_error', param: 'model', code: 'model_not_found' });
    const route = await ctx.h.http().get('/v1/assistants').set(ctx.alice.auth);
    expect(route.status).toBe(404);
    expect(route.body).toEqual({ error: { message: 'No such route.', type: 'invalid_request_error', param: null, code: 'not_found' } });
  });

  test('no token, or one that is not valid, is 401 with the challenge', async () => {
    const none = await ctx.h.http().get('/v1/models');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Bearer realm="ai-workspace-service"');
    expect(none.body.error).toMatchObject({ type: 'authentication_error', param: null, code: 'unauthenticated' });
    const bad = await refused(client('not-a-token').models.list());
    expect(bad).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(bad.headers?.get('www-authenticate')).toMatch(/error="invalid_token"/);
    // The browser session does not open /v1: bearer tokens only.
    const session = await ctx.h.http().post('/auth/session').set(ctx.alice.auth);
    const cookie = session.headers['set-cookie'] as unknown as string[];
    expect(cookie).toHaveLength(1);
    expect((await ctx.h.http().get('/v1/models').set('Cookie', cookie)).status).toBe(401);
  });

  test('the capability off is 403 capability_disabled on every operation', async () => {
    const switchTo = async (on: boolean) =>
      ctx.h
        .http()
        .patch('/api/v1/admin/capabilities')
        .set((await admin()).auth)
        .send({ openaiApi: on })
        .expect(200);
    await switchTo(false);
    try {
      const error = await refused(client(ctx.alice).models.list());
      expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect(error.error).toEqual({
        message: 'The OpenAI-compatible API is disabled for this deployment.',
        type: 'permission_error',
        param: null,
        code: 'capability_disabled',
      });
      expect(
        (await refused(client(ctx.alice).chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'x' }] })))
          .status,
      ).toBe(403);
      expect((await refused(client(ctx.alice).embeddings.create({ model: 'builtin-hashing', input: 'x' }))).status).toBe(403);
    } finally {
      await switchTo(true);
    }
  });
});
