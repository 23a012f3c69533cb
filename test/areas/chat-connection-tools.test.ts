import { sql } from 'kysely';
import { startFakeAnthropic, type FakeAnthropicServer } from '../helpers/anthropic-server';
import { startFakeGoogle, type FakeGoogleServer } from '../helpers/google-server';
import { type TestUser, textBody, useHarnessWith } from '../helpers/harness';
import { startMcpServer, type TestMcpServer } from '../helpers/mcp-server';
import { parseEvents } from '../helpers/openai-server';

// Tool calling through a user's own connections of kind `anthropic` and `google`: the same turn
// loop as over the OpenAI format, with the providers' own wire formats for tool calls and results
// (Anthropic's `tool_use` / `tool_result` content blocks, Gemini's `functionCall` /
// `functionResponse` parts), streamed from local servers that speak them.
const ANTHROPIC_KEY = 'sk-ant-api03-TOOLS-SECRET-7a3c1e9b5d2f8064';
const GOOGLE_KEY = 'AIzaSy-TOOLS-SECRET-2b8d4f6a0c1e3957';
const MCP_TOKEN = 'mcp-tools-token-ALICE-5e2a8c4f1b7d9036';

let anthropic: FakeAnthropicServer;
let google: FakeGoogleServer;
let mcp: TestMcpServer;
beforeAll(async () => {
  [anthropic, google, mcp] = await Promise.all([
    startFakeAnthropic(ANTHROPIC_KEY),
    startFakeGoogle(GOOGLE_KEY),
    startMcpServer({ header: 'authorization', value: `Bearer ${MCP_TOKEN}` }),
  ]);
});
afterAll(async () => {
  await Promise.all([anthropic?.close(), google?.close(), mcp?.close()]);
});

const ctx = useHarnessWith(() => ({ OUTBOUND_ALLOW_LOOPBACK: 'true' }), 'alice', 'bob');
const db = () => ctx.h.runtime.database.db;

/** A tested (active) connection of the caller's. */
async function connection(user: TestUser, kind: 'anthropic' | 'google', baseUrl: string, apiKey: string): Promise<string> {
  const created = await ctx.h
    .http()
    .post('/api/v1/model-providers')
    .set(user.auth)
    .send({ kind, name: `My ${kind} key`, baseUrl, apiKey });
  expect(created.status).toBe(200);
  const connectionId = created.body.connection.connectionId as string;
  const tested = await ctx.h.http().post('/api/v1/model-providers/test').set(user.auth).send({ connectionId });
  expect(tested.body.connection).toMatchObject({ status: 'active' });
  return connectionId;
}

/** The caller's MCP server (tools allowed): its tool prefix. */
async function mcpServer(user: TestUser): Promise<string> {
  const res = await ctx.h.http().post('/api/v1/mcp-servers').set(user.auth).send({
    name: 'Tracker',
    url: mcp.streamableUrl,
    transport: 'streamable_http',
    authentication: 'bearer',
    credentials: MCP_TOKEN,
    defaultToolPolicy: 'allow',
  });
  expect(res.body.server).toMatchObject({ status: 'active' });
  return res.body.server.toolPrefix as string;
}

/** A streamed turn in a new conversation on `model`: its events and the final reply. */
async function streamedTurn(user: TestUser, model: string, content: string) {
  // Titled: the usage records below are the turn's alone (no model-written title).
  const created = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({ model, title: 'Tools' });
  expect(created.status).toBe(200);
  const conversationId = created.body.conversation.conversationId as string;
  const res = await ctx.h
    .http()
    .post('/api/v1/conversations/messages')
    .set(user.auth)
    .send({ conversationId, content, stream: true })
    .buffer(true)
    .parse(textBody);
  expect(res.status).toBe(200);
  const events = parseEvents(res.body as string);
  type Part = { type: string; toolCallId: string; toolName: string; outcome?: string; output?: string; arguments?: unknown };
  const reply = (
    events.at(-1)!.data as { message: { messageId: string; status: string; content: string; model: string; usage: unknown; parts: Part[] } }
  ).message;
  return { events, reply, text: res.body as string };
}

/** The turn's usage records: one per model call, each with the connection and no cost. */
async function usageOf(messageId: string) {
  const rows = await sql<{
    resource_id: string;
    connection_id: string | null;
    model: string;
    cost_micro_cents: number;
    input_tokens: number;
    output_tokens: number;
  }>`
    select resource_id, connection_id, model, cost_micro_cents::int, input_tokens::int, output_tokens::int
    from usage_records where resource_id = ${messageId} or resource_id like ${`${messageId}:%`} order by id`.execute(db());
  return rows.rows;
}

describe('tool calls through a user connection', () => {
  test('Anthropic: a streamed turn calls a built-in tool and an MCP tool (tool_use blocks), with usage on the connection', async () => {
    expect(
      (await ctx.h.http().post('/api/v1/notes').set(ctx.alice.auth).send({ title: 'Launch', content: 'The launch is on Monday.' })).status,
    ).toBe(200);
    const connectionId = await connection(ctx.alice, 'anthropic', anthropic.baseUrl, ANTHROPIC_KEY);
    const prefix = await mcpServer(ctx.alice);
    const echo = `${prefix}__echo`;
    const model = `${connectionId}/claude-sonnet-4-5`;
    const first = anthropic.requests.length;
    const calls = mcp.calls.length;
    anthropic.script.push(
      {
        chunks: ['Let me look. '],
        toolUses: [{ id: 'toolu_01', name: 'notes_search', input: { query: 'launch' } }],
        usage: { input: 20, output: 6 },
      },
      { chunks: [], toolUses: [{ id: 'toolu_02', name: echo, input: { text: 'Monday' } }], usage: { input: 30, output: 5 } },
      { chunks: ['It is on ', 'Monday.'], usage: { input: 40, output: 4 } },
    );
    const { events, reply, text } = await streamedTurn(ctx.alice, model, 'When is the launch? Echo the day.');

    expect(events.map((e) => e.event).filter((e) => e !== 'delta')).toEqual([
      'message',
      'tool-call',
      'tool-result',
      'tool-call',
      'tool-result',
      'done',
    ]);
    expect(reply).toMatchObject({
      status: 'complete',
      model,
      content: 'Let me look. It is on Monday.',
      usage: { inputTokens: 90, outputTokens: 15, costCents: 0 },
    });
    expect(reply.parts.map((p) => p.type)).toEqual(['text', 'tool-call', 'tool-result', 'tool-call', 'tool-result', 'text']);
    expect(reply.parts[1]).toEqual({
      type: 'tool-call',
      toolCallId: 'toolu_01',
      toolName: 'notes_search',
      arguments: { query: 'launch' },
      policy: 'allow',
      approvalId: null,
    });
    expect(reply.parts[2]).toMatchObject({ toolCallId: 'toolu_01', outcome: 'success' });
    expect(JSON.parse(reply.parts[2]!.output!)).toEqual([expect.objectContaining({ title: 'Launch' })]);
    expect(reply.parts[3]).toMatchObject({ toolCallId: 'toolu_02', toolName: echo, arguments: { text: 'Monday' }, policy: 'allow' });
    expect(reply.parts[4]).toMatchObject({ toolCallId: 'toolu_02', outcome: 'success', output: 'echo: Monday' });
    expect(mcp.calls.slice(calls)).toEqual([{ name: 'echo', args: { text: 'Monday' } }]);

    // Anthropic's format on the wire: tools with input_schema; the calls given back as tool_use
    // blocks and their results as tool_result blocks of a user message.
    const sent = anthropic.requests.slice(first).map((r) => r.body!);
    expect(sent).toHaveLength(3);
    expect(sent.every((b) => b.stream === true && b.model === 'claude-sonnet-4-5')).toBe(true);
    const offered = sent[0]!.tools!;
    expect(offered.map((t) => t.name)).toEqual(expect.arrayContaining(['notes_search', echo]));
    expect(offered.find((t) => t.name === echo)!.input_schema).toMatchObject({ type: 'object', properties: { text: { type: 'string' } } });
    const blocks = (body: (typeof sent)[number]) =>
      (body.messages ?? []).flatMap((m) => (Array.isArray(m.content) ? m.content.map((c) => ({ role: m.role, ...c })) : []));
    expect(blocks(sent[1]!)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ role: 'assistant', type: 'tool_use', id: 'toolu_01', name: 'notes_search', input: { query: 'launch' } }),
        expect.objectContaining({ role: 'user', type: 'tool_result', tool_use_id: 'toolu_01' }),
      ]),
    );
    expect(blocks(sent[2]!)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ role: 'user', type: 'tool_result', tool_use_id: 'toolu_02', content: 'echo: Monday' }),
      ]),
    );

    // Each model call is a usage record with the connection, charged nothing to the deployment's budget.
    expect(await usageOf(reply.messageId)).toEqual([
      { resource_id: reply.messageId, connection_id: connectionId, model, cost_micro_cents: 0, input_tokens: 20, output_tokens: 6 },
      { resource_id: `${reply.messageId}:2`, connection_id: connectionId, model, cost_micro_cents: 0, input_tokens: 30, output_tokens: 5 },
      { resource_id: `${reply.messageId}:3`, connection_id: connectionId, model, cost_micro_cents: 0, input_tokens: 40, output_tokens: 4 },
    ]);
    const ledger = await sql<{ n: number }>`select count(*)::int as n from ledger_entries where user_id = ${ctx.alice.userId}`.execute(
      db(),
    );
    expect(ledger.rows[0]!.n).toBe(0);
    // Neither key reaches the client.
    for (const secret of [ANTHROPIC_KEY, MCP_TOKEN]) expect(text).not.toContain(secret);
  });

  test('Anthropic: a turn answered whole (no stream) runs the tool the same way', async () => {
    const connectionId = await connection(ctx.bob, 'anthropic', anthropic.baseUrl, ANTHROPIC_KEY);
    const created = await ctx.h
      .http()
      .post('/api/v1/conversations')
      .set(ctx.bob.auth)
      .send({ model: `${connectionId}/claude-haiku-4-5` });
    const first = anthropic.requests.length;
    anthropic.script.push(
      { chunks: [], toolUses: [{ id: 'toolu_11', name: 'projects_list', input: {} }] },
      { chunks: ['You have no projects.'] },
    );
    const res = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.bob.auth)
      .send({ conversationId: created.body.conversation.conversationId, content: 'My projects?' });
    expect(res.status).toBe(200);
    expect(res.body.reply).toMatchObject({ status: 'complete', content: 'You have no projects.' });
    expect(res.body.reply.parts.map((p: { type: string }) => p.type)).toEqual(['tool-call', 'tool-result', 'text']);
    expect(res.body.reply.parts[1]).toMatchObject({ toolCallId: 'toolu_11', toolName: 'projects_list', outcome: 'success' });
    expect(anthropic.requests.slice(first).map((r) => r.body?.stream ?? false)).toEqual([false, false]);
    // Bob's turn was offered the built-in tools, not Alice's MCP tools.
    expect(anthropic.requests[first]!.body!.tools!.some((t) => t.name.includes('__'))).toBe(false);
  });

  test('Google: a streamed turn calls a built-in tool and an MCP tool (functionCall parts), with usage on the connection', async () => {
    const connectionId = await connection(ctx.alice, 'google', google.baseUrl, GOOGLE_KEY);
    const tools = await ctx.h.http().get('/api/v1/tools').set(ctx.alice.auth);
    const echo = (tools.body.tools as Array<{ name: string }>).map((t) => t.name).find((n) => n.endsWith('__echo')) as string;
    const model = `${connectionId}/gemini-2.5-flash`;
    const first = google.requests.length;
    const calls = mcp.calls.length;
    google.script.push(
      { chunks: ['Looking. '], functionCalls: [{ name: 'notes_search', args: { query: 'launch' } }], usage: { prompt: 21, candidates: 3 } },
      { chunks: [], functionCalls: [{ name: echo, args: { text: 'Gemini' } }], usage: { prompt: 31, candidates: 2 } },
      { chunks: ['Monday, ', 'and echoed.'], usage: { prompt: 41, candidates: 4 } },
    );
    const { events, reply, text } = await streamedTurn(ctx.alice, model, 'When is the launch? Echo my name.');

    expect(events.map((e) => e.event).filter((e) => e !== 'delta')).toEqual([
      'message',
      'tool-call',
      'tool-result',
      'tool-call',
      'tool-result',
      'done',
    ]);
    expect(reply).toMatchObject({
      status: 'complete',
      model,
      content: 'Looking. Monday, and echoed.',
      usage: { inputTokens: 93, outputTokens: 9, costCents: 0 },
    });
    const results = reply.parts.filter((p) => p.type === 'tool-result');
    expect(results.map((p) => [p.toolName, p.outcome])).toEqual([
      ['notes_search', 'success'],
      [echo, 'success'],
    ]);
    expect(results[1]!.output).toBe('echo: Gemini');
    expect(mcp.calls.slice(calls)).toEqual([{ name: 'echo', args: { text: 'Gemini' } }]);

    // Gemini's format on the wire: function declarations; the calls given back as functionCall
    // parts of the model and their results as functionResponse parts.
    const sent = google.requests.slice(first);
    expect(sent.map((r) => [r.model, r.stream, r.apiKey])).toEqual(Array(3).fill(['gemini-2.5-flash', true, GOOGLE_KEY]));
    const declared = sent[0]!.body!.tools!.flatMap((t) => t.functionDeclarations ?? []).map((d) => d.name);
    expect(declared).toEqual(expect.arrayContaining(['notes_search', echo]));
    const partsOf = (n: number) => (sent[n]!.body!.contents ?? []).flatMap((c) => c.parts.map((p) => ({ role: c.role, ...p })));
    expect(partsOf(2)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ role: 'model', functionCall: expect.objectContaining({ name: echo, args: { text: 'Gemini' } }) }),
        expect.objectContaining({
          role: 'user',
          functionResponse: expect.objectContaining({ name: echo, response: expect.objectContaining({ content: 'echo: Gemini' }) }),
        }),
      ]),
    );

    expect(
      (await usageOf(reply.messageId)).map((r) => [r.connection_id, r.model, r.cost_micro_cents, r.input_tokens, r.output_tokens]),
    ).toEqual([
      [connectionId, model, 0, 21, 3],
      [connectionId, model, 0, 31, 2],
      [connectionId, model, 0, 41, 4],
    ]);
    for (const secret of [GOOGLE_KEY, MCP_TOKEN]) expect(text).not.toContain(secret);
  });
});
