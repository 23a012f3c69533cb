import { type TestUser, textBody, useHarnessWith } from '../helpers/harness';
import { startMcpServer, type TestMcpServer } from '../helpers/mcp-server';
import { type Behaviour, parseEvents, scriptAnswers, useFakeModelAndReceiver } from '../helpers/openai-server';

// A chat turn that calls a tool of the caller's MCP server: the local OpenAI-format model server
// emits the tool call, the service calls the MCP server (Streamable HTTP and SSE) with the
// caller's credentials, and the model is given the result.
const TOKEN = 'mcp-chat-token-ALICE-4f1c9a7e2b6d8053';
let mcp: TestMcpServer;
beforeAll(async () => {
  mcp = await startMcpServer({ header: 'authorization', value: `Bearer ${TOKEN}` });
});
afterAll(() => mcp.close());

/** The cap on a tool result the model is given, and on one answer of an MCP server. */
const RESULT_CAP = 4096;
const ANSWER_CAP = 256 * 1024;

const servers = useFakeModelAndReceiver();
const ctx = useHarnessWith(
  () => ({
    MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
    MODEL_PROVIDER_MODELS: 'test-model',
    OUTBOUND_ALLOW_LOOPBACK: 'true',
    TOOL_RESULT_MAX_BYTES: String(RESULT_CAP),
    MCP_MAX_RESPONSE_BYTES: String(ANSWER_CAP),
  }),
  'alice',
  'bob',
);

const script = (...answers: Behaviour[]) => scriptAnswers(servers.model, ...answers);

async function register(user: TestUser, transport: 'streamable_http' | 'sse', policy: 'allow' | 'approval_required' | 'deny') {
  const url = transport === 'sse' ? mcp.sseUrl : mcp.streamableUrl;
  const res = await ctx.h
    .http()
    .post('/api/v1/mcp-servers')
    .set(user.auth)
    .send({ name: `Tracker ${transport}`, url, transport, authentication: 'bearer', credentials: TOKEN, defaultToolPolicy: policy });
  expect(res.status).toBe(200);
  expect(res.body.server.status).toBe('active');
  return res.body.server as { serverId: string; toolPrefix: string };
}

async function conversation(user: TestUser): Promise<string> {
  const res = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({});
  expect(res.status).toBe(200);
  return res.body.conversation.conversationId;
}

describe('chat with MCP tools', () => {
  test.each(['streamable_http', 'sse'] as const)(
    "a turn calls a tool of the caller's %s server and answers with its result",
    async (transport) => {
      const server = await register(ctx.alice, transport, 'allow');
      const tool = `${server.toolPrefix}__echo`;
      const listed = await ctx.h.http().get('/api/v1/tools').set(ctx.alice.auth);
      expect(listed.body.tools.map((t: { name: string }) => t.name)).toContain(tool);

      const conversationId = await conversation(ctx.alice);
      const first = servers.model.requests.length;
      const calls = mcp.calls.length;
      script(
        { kind: 'tool-calls', calls: [{ id: 'call_m1', name: tool, arguments: JSON.stringify({ text: 'hello from chat' }) }] },
        { kind: 'reply', chunks: ['It said ', 'hello.'] },
      );
      const res = await ctx.h
        .http()
        .post('/api/v1/conversations/messages')
        .set(ctx.alice.auth)
        .send({ conversationId, content: 'Echo something.', stream: true })
        .buffer(true)
        .parse(textBody);
      expect(res.status).toBe(200);
      const events = parseEvents(res.body as string);
      const names = events.map((e) => e.event);
      expect(names.indexOf('tool-call')).toBeLessThan(names.indexOf('tool-result'));
      const result = events.find((e) => e.event === 'tool-result')!.data as {
        part: { toolName: string; outcome: string; output: string; isError: boolean };
      };
      expect(result.part).toMatchObject({ toolName: tool, outcome: 'success', isError: false });
      expect(result.part.output).toContain('echo: hello from chat');
      const done = events.find((e) => e.event === 'done')!.data as { message: { status: string; content: string } };
      expect(done.message).toMatchObject({ status: 'complete', content: 'It said hello.' });

      // The MCP server ran the call once, with the arguments the model gave and the caller's credential.
      expect(mcp.calls.slice(calls)).toEqual([{ name: 'echo', args: { text: 'hello from chat' } }]);
      expect(mcp.requests.at(-1)?.headers.authorization).toBe(`Bearer ${TOKEN}`);
      // The model was offered the namespaced tool, and given its result in the second request.
      const [offered, followUp] = servers.model.requests.slice(first);
      expect(offered!.body.tools?.map((t) => t.function.name)).toContain(tool);
      const toolMessage = followUp!.body.messages.find((m) => m.role === 'tool');
      expect(toolMessage).toMatchObject({ tool_call_id: 'call_m1' });
      expect(toolMessage!.content).toContain('echo: hello from chat');
      await ctx.h.http().delete('/api/v1/mcp-servers').query({ serverId: server.serverId }).set(ctx.alice.auth).expect(200);
    },
  );

  test("another user's turn is never offered the caller's MCP tools, and a call to one by name runs nothing", async () => {
    const server = await register(ctx.alice, 'streamable_http', 'allow');
    const tool = `${server.toolPrefix}__echo`;
    const conversationId = await conversation(ctx.bob);
    const first = servers.model.requests.length;
    const calls = mcp.calls.length;
    script({ kind: 'tool-calls', calls: [{ id: 'call_b1', name: tool, arguments: JSON.stringify({ text: 'not yours' }) }] });
    const res = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.bob.auth)
      .send({ conversationId, content: 'Use their tool.' });
    expect(res.status).toBe(200);
    expect(servers.model.requests[first]!.body.tools?.map((t) => t.function.name) ?? []).not.toContain(tool);
    expect(res.body.reply.parts.find((p: { type: string }) => p.type === 'tool-result')).toMatchObject({
      toolName: tool,
      outcome: 'not_found',
      isError: true,
    });
    expect(mcp.calls.length).toBe(calls);
    await ctx.h.http().delete('/api/v1/mcp-servers').query({ serverId: server.serverId }).set(ctx.alice.auth).expect(200);
  });

  test('a `deny` MCP tool is never offered nor run; an `approval_required` one pauses the turn until approved', async () => {
    const denied = await register(ctx.alice, 'streamable_http', 'deny');
    const asked = await register(ctx.alice, 'sse', 'approval_required');
    const conversationId = await conversation(ctx.alice);
    const first = servers.model.requests.length;
    const calls = mcp.calls.length;
    const askedTool = `${asked.toolPrefix}__echo`;
    script(
      { kind: 'tool-calls', calls: [{ id: 'call_a1', name: askedTool, arguments: JSON.stringify({ text: 'approved words' }) }] },
      { kind: 'reply', chunks: ['Echoed.'] },
    );
    const paused = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Echo, with my approval.' });
    expect(paused.status).toBe(200);
    expect(paused.body.reply.status).toBe('awaiting_approval');
    const offered = servers.model.requests[first]!.body.tools?.map((t) => t.function.name) ?? [];
    expect(offered).toContain(askedTool);
    expect(offered).not.toContain(`${denied.toolPrefix}__echo`);
    expect(mcp.calls.length).toBe(calls);

    const approvalId = paused.body.reply.parts.find((p: { type: string }) => p.type === 'tool-call').approvalId as string;
    const decided = await ctx.h
      .http()
      .post('/api/v1/approvals/decide')
      .set(ctx.alice.auth)
      .send({ approvalId, decision: 'approve', arguments: { text: 'approved words' } });
    expect(decided.status).toBe(200);
    expect(decided.body.reply).toMatchObject({ status: 'complete', content: 'Echoed.' });
    expect(mcp.calls.slice(calls)).toEqual([{ name: 'echo', args: { text: 'approved words' } }]);
  });
});

describe("an MCP tool's arguments", () => {
  test('arguments that do not fit the schema are answered to the model and never reach the server; a schema Ajv cannot compile leaves the check to the server', async () => {
    const server = await register(ctx.alice, 'streamable_http', 'allow');
    const [dated, legacy] = [`${server.toolPrefix}__dated`, `${server.toolPrefix}__legacy`];
    const conversationId = await conversation(ctx.alice);
    const calls = mcp.calls.length;
    script(
      {
        kind: 'tool-calls',
        calls: [
          { id: 'call_d1', name: dated, arguments: JSON.stringify({ day: 'tomorrow', at: 'noon' }) },
          { id: 'call_d2', name: dated, arguments: JSON.stringify({ day: '2026-01-31' }) },
          { id: 'call_l1', name: legacy, arguments: JSON.stringify({ text: 5 }) },
        ],
      },
      { kind: 'reply', chunks: ['Checked.'] },
    );
    const res = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Use the dated tools.' });
    expect(res.status).toBe(200);
    expect(res.body.reply).toMatchObject({ status: 'complete', content: 'Checked.' });
    const results = res.body.reply.parts.filter((p: { type: string }) => p.type === 'tool-result');
    expect(results.map((r: { toolCallId: string; outcome: string }) => [r.toolCallId, r.outcome])).toEqual([
      ['call_d1', 'error'],
      ['call_d2', 'success'],
      ['call_l1', 'success'],
    ]);
    expect(results[0].output).toBe(
      'The arguments are not valid: at is not a known argument; day must match pattern "^\\d{4}-\\d{2}-\\d{2}$".',
    );
    expect(mcp.calls.slice(calls)).toEqual([
      { name: 'dated', args: { day: '2026-01-31' } },
      { name: 'legacy', args: { text: 5 } },
    ]);
    await ctx.h.http().delete('/api/v1/mcp-servers').query({ serverId: server.serverId }).set(ctx.alice.auth).expect(200);
  });
});

describe('a result cut anywhere is marked truncated', () => {
  type ResultPart = { type: string; toolName: string; outcome: string; output: string; isError: boolean; truncated: boolean };

  test.each(['streamable_http', 'sse'] as const)(
    '%s: cut at the result cap, or past the answer cap while read: truncated, streamed and stored',
    async (transport) => {
      const server = await register(ctx.alice, transport, 'allow');
      const tool = `${server.toolPrefix}__big`;
      const conversationId = await conversation(ctx.alice);
      const first = servers.model.requests.length;
      const sizes = [100, RESULT_CAP * 10, ANSWER_CAP * 2];
      script(
        { kind: 'tool-calls', calls: sizes.map((bytes, i) => ({ id: `call_t${i}`, name: tool, arguments: JSON.stringify({ bytes }) })) },
        { kind: 'reply', chunks: ['Done.'] },
      );
      const res = await ctx.h
        .http()
        .post('/api/v1/conversations/messages')
        .set(ctx.alice.auth)
        .send({ conversationId, content: 'Fetch it all.', stream: true })
        .buffer(true)
        .parse(textBody);
      expect(res.status).toBe(200);
      const events = parseEvents(res.body as string);
      const streamed = events.filter((e) => e.event === 'tool-result').map((e) => (e.data as { part: ResultPart }).part);
      expect(streamed).toEqual([
        {
          type: 'tool-result',
          toolCallId: 'call_t0',
          toolName: tool,
          outcome: 'success',
          output: 'x'.repeat(100),
          isError: false,
          truncated: false,
        },
        {
          type: 'tool-result',
          toolCallId: 'call_t1',
          toolName: tool,
          outcome: 'success',
          output: expect.stringMatching(
            new RegExp(`^x+\\n\\[output truncated: ${RESULT_CAP * 10} bytes, only the first part is shown\\]$`),
          ),
          isError: false,
          truncated: true,
        },
        {
          type: 'tool-result',
          toolCallId: 'call_t2',
          toolName: tool,
          outcome: 'error',
          output: `The MCP server's answer is larger than ${ANSWER_CAP} bytes.`,
          isError: true,
          truncated: true,
        },
      ]);
      expect(Buffer.byteLength(streamed[1]!.output)).toBeLessThanOrEqual(RESULT_CAP);

      // The stored reply says the same (read back through the API, validated).
      const done = (events.at(-1)!.data as { message: { status: string; parts: ResultPart[] } }).message;
      expect(done.status).toBe('complete');
      const listed = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(ctx.alice.auth);
      expect(listed.body.messages[0].parts.filter((p: ResultPart) => p.type === 'tool-result')).toEqual(streamed);
      // The model was given the cut output.
      const toolMessages = servers.model.requests[first + 1]!.body.messages.filter((m) => m.role === 'tool');
      expect(toolMessages.map((m) => m.content)).toEqual(streamed.map((p) => p.output));
      await ctx.h.http().delete('/api/v1/mcp-servers').query({ serverId: server.serverId }).set(ctx.alice.auth).expect(200);
    },
  );
});

describe('a server that fails never breaks a chat turn', () => {
  type Part = { type: string; serverId?: string; serverName?: string; reason?: string; toolName?: string; outcome?: string };

  const failures: Array<[string, (server: TestMcpServer) => Promise<void>]> = [
    ['is down', (server) => server.close()],
    [
      'answers HTTP errors',
      async (server) => {
        server.failWith = 500;
      },
    ],
  ];
  test.each(failures)('a server that %s during a turn: the turn goes on with the other tools, and the reply names it', async (_, fail) => {
    const flaky = await startMcpServer({ header: 'authorization', value: `Bearer ${TOKEN}` });
    try {
      const good = await register(ctx.alice, 'streamable_http', 'allow');
      const created = await ctx.h.http().post('/api/v1/mcp-servers').set(ctx.alice.auth).send({
        name: 'Flaky tracker',
        url: flaky.streamableUrl,
        transport: 'streamable_http',
        authentication: 'bearer',
        credentials: TOKEN,
        defaultToolPolicy: 'allow',
      });
      expect(created.body.server.status).toBe('active');
      const bad = created.body.server as { serverId: string; toolPrefix: string };
      await fail(flaky);

      const conversationId = await conversation(ctx.alice);
      const first = servers.model.requests.length;
      script(
        { kind: 'tool-calls', calls: [{ id: 'call_f1', name: `${bad.toolPrefix}__echo`, arguments: JSON.stringify({ text: 'one' }) }] },
        { kind: 'tool-calls', calls: [{ id: 'call_g1', name: `${good.toolPrefix}__echo`, arguments: JSON.stringify({ text: 'two' }) }] },
        { kind: 'reply', chunks: ['The tracker is down; ', 'the other one said two.'] },
      );
      const res = await ctx.h
        .http()
        .post('/api/v1/conversations/messages')
        .set(ctx.alice.auth)
        .send({ conversationId, content: 'Echo twice.', stream: true })
        .buffer(true)
        .parse(textBody);
      expect(res.status).toBe(200);
      const events = parseEvents(res.body as string);
      expect(events.map((e) => e.event).filter((e) => e !== 'delta')).toEqual([
        'message',
        'tool-call',
        'tool-result',
        'tool-source-unavailable',
        'tool-call',
        'tool-result',
        'done',
      ]);
      const results = events.filter((e) => e.event === 'tool-result').map((e) => (e.data as { part: Part }).part);
      expect(results[0]).toMatchObject({ toolName: `${bad.toolPrefix}__echo`, outcome: 'error', isError: true });
      expect(results[1]).toMatchObject({ toolName: `${good.toolPrefix}__echo`, outcome: 'success', isError: false });
      const unavailable = (events.find((e) => e.event === 'tool-source-unavailable')!.data as { part: Part }).part;
      expect(unavailable).toEqual({
        type: 'tool-source-unavailable',
        serverId: bad.serverId,
        serverName: 'Flaky tracker',
        reason: expect.stringMatching(/^The MCP server (could not be reached|answered 500)\.$/),
      });

      // The reply is complete, and keeps the part (read back through the API, validated).
      const done = (events.at(-1)!.data as { message: { messageId: string; status: string; content: string; parts: Part[] } }).message;
      expect(done).toMatchObject({ status: 'complete', content: 'The tracker is down; the other one said two.' });
      expect(done.parts.filter((p) => p.type === 'tool-source-unavailable')).toEqual([unavailable]);
      const listed = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(ctx.alice.auth);
      expect(listed.status).toBe(200);
      expect(listed.body.messages[0].parts).toEqual(done.parts);

      // From the failure on, the model is not offered the server's tools; the other server's it is.
      const [offered, afterFailure] = servers.model.requests.slice(first).map((r) => r.body.tools?.map((t) => t.function.name) ?? []);
      expect(offered).toEqual(expect.arrayContaining([`${bad.toolPrefix}__echo`, `${good.toolPrefix}__echo`]));
      expect(afterFailure).toContain(`${good.toolPrefix}__echo`);
      expect(afterFailure!.some((name) => name.startsWith(`${bad.toolPrefix}__`))).toBe(false);

      // Neither the server's address nor its credential reaches the client or the model.
      const { host } = new URL(flaky.streamableUrl);
      for (const text of [res.body as string, JSON.stringify(servers.model.requests.slice(first).map((r) => r.body))]) {
        expect(text).not.toContain(host);
        expect(text).not.toContain(TOKEN);
      }
      for (const id of [good.serverId, bad.serverId])
        await ctx.h.http().delete('/api/v1/mcp-servers').query({ serverId: id }).set(ctx.alice.auth).expect(200);
    } finally {
      await flaky.close();
    }
  });

  test('a server already failing when the turn starts: its tools are not offered, the model is told, and the reply names it first', async () => {
    const gone = await startMcpServer();
    const url = gone.sseUrl;
    await gone.close();
    const created = await ctx.h
      .http()
      .post('/api/v1/mcp-servers')
      .set(ctx.alice.auth)
      .send({ name: 'Gone tracker', url, transport: 'sse', defaultToolPolicy: 'allow' });
    expect(created.status).toBe(200);
    expect(created.body.server).toMatchObject({ status: 'error', lastError: 'The MCP server could not be reached.' });
    const serverId = created.body.server.serverId as string;

    const conversationId = await conversation(ctx.alice);
    const first = servers.model.requests.length;
    script({ kind: 'reply', chunks: ['I cannot reach your tracker now.'] });
    const res = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'What is in my tracker?' });
    expect(res.status).toBe(200);
    expect(res.body.reply).toMatchObject({ status: 'complete', content: 'I cannot reach your tracker now.' });
    expect(res.body.reply.parts).toEqual([
      { type: 'tool-source-unavailable', serverId, serverName: 'Gone tracker', reason: 'The MCP server could not be reached.' },
      { type: 'text', text: 'I cannot reach your tracker now.' },
    ]);
    const request = servers.model.requests[first]!.body;
    expect(request.messages[0]!.content).toContain('the MCP server "Gone tracker": The MCP server could not be reached.');
    expect(JSON.stringify(request)).not.toContain(new URL(url).host);
    // Bob's turns say nothing of Alice's servers.
    const bobs = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.bob.auth)
      .send({ conversationId: await conversation(ctx.bob), content: 'Hello.' });
    expect(bobs.body.reply.parts.some((p: Part) => p.type === 'tool-source-unavailable')).toBe(false);
    await ctx.h.http().delete('/api/v1/mcp-servers').query({ serverId }).set(ctx.alice.auth).expect(200);
  });
});
