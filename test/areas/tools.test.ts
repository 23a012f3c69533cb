import { asListed, startHarness, textBody, type TestUser, useHarnessWith } from '../helpers/harness';
import { type Behaviour, parseEvents, scriptAnswers, useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually, subscribe, verify } from '../helpers/receiver';

const servers = useFakeModelAndReceiver();
const ctx = useHarnessWith(
  () => ({
    MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
    MODEL_PROVIDER_MODELS: 'test-model:100:200',
    TOOL_MAX_STEPS: '3',
    TOOL_RESULT_MAX_BYTES: '512',
    BUILTIN_TOOL_POLICIES: 'memory_save=deny',
    WEBHOOK_ALLOW_LOOPBACK: 'true',
    WEBHOOK_POLL_INTERVAL_MS: '20',
  }),
  'alice',
  'bob',
);

const FINAL: Behaviour = { kind: 'reply', chunks: ['Done', '.'] };

const script = (...answers: Behaviour[]) => scriptAnswers(servers.model, ...answers);

const call = (id: string, name: string, args: Record<string, unknown> | string): Behaviour => ({
  kind: 'tool-calls',
  calls: [{ id, name, arguments: typeof args === 'string' ? args : JSON.stringify(args) }],
});

// Titled: the model-written title of an untitled one would be one more request to the model.
async function conversation(user: TestUser): Promise<string> {
  const res = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({ title: 'Tools' });
  expect(res.status).toBe(200);
  return res.body.conversation.conversationId;
}

const send = (user: TestUser, conversationId: string, content: string) =>
  ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send({ conversationId, content });

const decide = (user: TestUser, body: Record<string, unknown>) => ctx.h.http().post('/api/v1/approvals/decide').set(user.auth).send(body);

async function notes(user: TestUser) {
  const res = await ctx.h.http().get('/api/v1/notes').set(user.auth);
  expect(res.status).toBe(200);
  return res.body.notes as Array<{ title: string; content: string }>;
}

const db = () => ctx.h.runtime.database.db;

async function approvalAudits(approvalId: string) {
  return db()
    .selectFrom('audit_events')
    .selectAll()
    .where('action', '=', 'tool.approval.decide')
    .where('resource_id', '=', approvalId)
    .execute();
}

/** A turn in which the model calls notes_create (approval required): the paused reply and its approval. */
async function pausedTurn(user: TestUser, args: Record<string, unknown>) {
  const conversationId = await conversation(user);
  script(call('call_w', 'notes_create', args));
  const res = await send(user, conversationId, 'Write it down.');
  expect(res.status).toBe(200);
  expect(res.body.reply).toMatchObject({ status: 'awaiting_approval', errorCode: null });
  const callPart = res.body.reply.parts.find((p: { type: string }) => p.type === 'tool-call');
  expect(callPart).toMatchObject({ toolName: 'notes_create', arguments: args, policy: 'approval_required' });
  expect(callPart.approvalId).toEqual(expect.any(String));
  return { conversationId, reply: res.body.reply, approvalId: callPart.approvalId as string };
}

describe('the tool registry', () => {
  test("lists the built-in tools with their schemas and policies, adjusted by the caller's setting", async () => {
    const res = await ctx.h.http().get('/api/v1/tools').set(ctx.alice.auth);
    expect(res.status).toBe(200);
    const policies = Object.fromEntries(res.body.tools.map((t: { name: string; policy: string }) => [t.name, t.policy]));
    expect(policies).toEqual({
      knowledge_search: 'allow',
      memory_search: 'allow',
      memory_save: 'deny', // BUILTIN_TOOL_POLICIES
      notes_search: 'allow',
      notes_read: 'allow',
      notes_create: 'approval_required',
      file_read: 'allow',
      projects_list: 'allow',
      automation_run: 'approval_required',
    });
    expect(res.body.unavailable).toEqual([]);
    for (const tool of res.body.tools) {
      expect(tool.name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
      expect(tool.source).toEqual({ type: 'builtin' });
      expect(tool.inputSchema).toMatchObject({ type: 'object', additionalProperties: false });
    }

    const carol = await ctx.h.newUser('carol');
    const policiesOf = async () =>
      Object.fromEntries(
        (await ctx.h.http().get('/api/v1/tools').set(carol.auth)).body.tools.map((t: { name: string; policy: string }) => [
          t.name,
          t.policy,
        ]),
      );
    expect((await ctx.h.http().patch('/api/v1/settings').set(carol.auth).send({ toolApproval: 'always_ask' })).status).toBe(200);
    expect(await policiesOf()).toMatchObject({ notes_search: 'approval_required', notes_create: 'approval_required', memory_save: 'deny' });
    expect((await ctx.h.http().patch('/api/v1/settings').set(carol.auth).send({ toolApproval: 'auto_approve' })).status).toBe(200);
    expect(await policiesOf()).toMatchObject({ notes_search: 'allow', notes_create: 'allow', memory_save: 'deny' });
  });

  test('an unknown query parameter is a 400', async () => {
    const res = await ctx.h.http().get('/api/v1/tools').query({ serverId: 'x' }).set(ctx.alice.auth);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
  });
});

describe('tool calling in chat', () => {
  test('the model calls a built-in tool (notes_search) through OpenAI-format tool calls, then answers', async () => {
    const user = await ctx.h.newUser('searcher');
    expect(
      (await ctx.h.http().post('/api/v1/notes').set(user.auth).send({ title: 'Launch', content: 'The launch is on Monday.' })).status,
    ).toBe(200);
    const conversationId = await conversation(user);
    script(call('call_1', 'notes_search', { query: 'launch' }), {
      kind: 'reply',
      chunks: ['The launch', ' is on Monday.'],
      usage: { prompt: 30, completion: 7 },
    });
    const before = servers.model.requests.length;
    const res = await send(user, conversationId, 'When is the launch?');
    expect(res.status).toBe(200);
    const { reply } = res.body;
    expect(reply).toMatchObject({ status: 'complete', content: 'The launch is on Monday.' });
    expect(reply.parts.map((p: { type: string }) => p.type)).toEqual(['tool-call', 'tool-result', 'text']);
    expect(reply.parts[0]).toEqual({
      type: 'tool-call',
      toolCallId: 'call_1',
      toolName: 'notes_search',
      arguments: { query: 'launch' },
      policy: 'allow',
      approvalId: null,
    });
    expect(reply.parts[1]).toMatchObject({
      type: 'tool-result',
      toolCallId: 'call_1',
      toolName: 'notes_search',
      outcome: 'success',
      isError: false,
      truncated: false,
    });
    expect(JSON.parse(reply.parts[1].output)).toEqual([expect.objectContaining({ title: 'Launch', noteId: expect.any(String) })]);
    // Each step is charged: two model calls, their usage summed on the reply.
    expect(reply.usage).toMatchObject({ inputTokens: 40, outputTokens: 12 });
    const records = await db()
      .selectFrom('usage_records')
      .select(['resource_id', 'input_tokens'])
      .where('user_id', '=', user.userId)
      .orderBy('id')
      .execute();
    expect(records).toEqual([
      { resource_id: reply.messageId, input_tokens: 10 },
      { resource_id: `${reply.messageId}:2`, input_tokens: 30 },
    ]);

    // The model was offered the tools (not the denied one), then given the call and its result.
    const [first, second] = servers.model.requests.slice(before).map((r) => r.body);
    const offered = first!.tools!.map((t) => t.function.name);
    expect(offered).toContain('notes_search');
    expect(offered).not.toContain('memory_save');
    const toolMessage = second!.messages.find((m) => m.role === 'tool');
    expect(toolMessage).toMatchObject({ tool_call_id: 'call_1' });
    expect(toolMessage!.content).toContain('is on Monday');
    expect(toolMessage!.content).toBe(reply.parts[1].output);
    expect(second!.messages.find((m) => m.tool_calls)?.tool_calls?.[0]).toMatchObject({ id: 'call_1', function: { name: 'notes_search' } });

    // Stored as sent.
    const stored = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(user.auth);
    expect(stored.body.messages[0]).toEqual(asListed(reply));
  });

  test('a streamed turn sends tool-call and tool-result events in order, then the answer', async () => {
    const conversationId = await conversation(ctx.alice);
    script(call('call_s', 'projects_list', {}), { kind: 'reply', chunks: ['No', ' projects.'] });
    const res = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Which projects?', stream: true })
      .buffer(true)
      .parse(textBody);
    expect(res.status).toBe(200);
    const events = parseEvents(res.body as string);
    expect(events.map((e) => e.event)).toEqual(['message', 'tool-call', 'tool-result', 'delta', 'delta', 'done']);
    expect(events[1]!.data.part).toMatchObject({ type: 'tool-call', toolCallId: 'call_s', toolName: 'projects_list', arguments: {} });
    expect(events[2]!.data.part).toMatchObject({ type: 'tool-result', toolCallId: 'call_s', outcome: 'success', output: '[]' });
    expect(events[5]!.data.message).toMatchObject({ status: 'complete', content: 'No projects.' });
    expect((events[5]!.data.message as { parts: unknown[] }).parts).toHaveLength(3);
  });

  test('a deny tool never runs: the model is told so and the turn goes on', async () => {
    const user = await ctx.h.newUser('denied');
    const conversationId = await conversation(user);
    script(call('call_d', 'memory_save', { content: 'Likes tea.' }));
    const res = await send(user, conversationId, 'Remember I like tea.');
    expect(res.status).toBe(200);
    expect(res.body.reply.status).toBe('complete');
    expect(res.body.reply.parts[0]).toMatchObject({ type: 'tool-call', toolName: 'memory_save', policy: 'deny', approvalId: null });
    expect(res.body.reply.parts[1]).toMatchObject({ type: 'tool-result', outcome: 'denied', isError: true });
    const memory = await ctx.h.http().get('/api/v1/memory').set(user.auth);
    expect(memory.body.memoryItems).toEqual([]);
    expect(await db().selectFrom('memory_items').select('id').where('owner_user_id', '=', user.userId).execute()).toEqual([]);
  });

  test('a failing call, bad arguments or an unknown tool are results for the model, not a failed turn', async () => {
    const conversationId = await conversation(ctx.alice);
    script({
      kind: 'tool-calls',
      calls: [
        { id: 'call_a', name: 'file_read', arguments: '{"fileId":"no-such-file"}' },
        { id: 'call_b', name: 'notes_search', arguments: '{"query":""}' },
        { id: 'call_c', name: 'no_such_tool', arguments: '{}' },
      ],
    });
    const res = await send(ctx.alice, conversationId, 'Try things.');
    expect(res.status).toBe(200);
    expect(res.body.reply.status).toBe('complete');
    const results = res.body.reply.parts.filter((p: { type: string }) => p.type === 'tool-result');
    expect(results.map((r: { toolCallId: string; outcome: string; isError: boolean }) => [r.toolCallId, r.outcome, r.isError])).toEqual([
      ['call_a', 'error', true],
      ['call_b', 'error', true],
      ['call_c', 'not_found', true],
    ]);
    expect(results[0].output).toBe('File not found.');
    expect(results[1].output).toBe('The arguments are not valid: query must NOT have fewer than 1 characters.');
  });

  test("every built-in tool's arguments are checked against its schema before it runs", async () => {
    const user = await ctx.h.newUser('checked');
    expect((await ctx.h.http().patch('/api/v1/settings').set(user.auth).send({ toolApproval: 'auto_approve' })).status).toBe(200);
    const listed = await ctx.h.http().get('/api/v1/tools').set(user.auth);
    const names = (listed.body.tools as Array<{ name: string; policy: string }>).filter((t) => t.policy === 'allow').map((t) => t.name);
    expect(names).toHaveLength(8); // all but memory_save (deny)
    const conversationId = await conversation(user);
    script({ kind: 'tool-calls', calls: names.map((name, i) => ({ id: `call_${i}`, name, arguments: '{"bogus":true,"limit":"many"}' })) });
    const res = await send(user, conversationId, 'Call them all wrongly.');
    expect(res.status).toBe(200);
    const results = res.body.reply.parts.filter((p: { type: string }) => p.type === 'tool-result');
    expect(results).toHaveLength(8);
    for (const result of results) {
      expect(result).toMatchObject({ outcome: 'error', isError: true });
      expect(result.output).toMatch(/^The arguments are not valid: .*bogus is not a known argument/);
    }
    const search = results.find((r: { toolName: string }) => r.toolName === 'knowledge_search');
    expect(search.output).toBe('The arguments are not valid: query is required; bogus is not a known argument; limit must be integer.');
    expect(await db().selectFrom('notes').select('id').where('owner_user_id', '=', user.userId).execute()).toEqual([]);
  });

  test('the arguments of an array or an enum name the item at fault and the allowed values', async () => {
    const conversationId = await conversation(ctx.alice);
    script(call('call_e', 'knowledge_search', { query: 'tea', sources: ['notes', 'mail', 'notes'] }));
    const res = await send(ctx.alice, conversationId, 'Search.');
    const result = res.body.reply.parts.find((p: { type: string }) => p.type === 'tool-result');
    expect(result).toMatchObject({ outcome: 'error', isError: true });
    expect(result.output).toBe(
      'The arguments are not valid: sources[1] must be one of files, memory, notes, projects; sources must NOT have duplicate items (items 0 and 2 are identical).',
    );
  });

  test('the step limit: the last model call is made without tools, so the turn ends with an answer', async () => {
    const conversationId = await conversation(ctx.alice);
    const before = servers.model.requests.length;
    servers.model.behaviour = (n) => (servers.model.requests[n]!.body.tools ? call(`call_${n}`, 'notes_search', { query: 'loop' }) : FINAL);
    const res = await send(ctx.alice, conversationId, 'Loop.');
    expect(res.status).toBe(200);
    expect(res.body.reply).toMatchObject({ status: 'complete', content: 'Done.' });
    const requests = servers.model.requests.slice(before).map((r) => r.body);
    expect(requests).toHaveLength(3); // TOOL_MAX_STEPS
    expect(requests.map((r) => r.tools !== undefined)).toEqual([true, true, false]);
    expect(res.body.reply.parts.filter((p: { type: string }) => p.type === 'tool-result')).toHaveLength(2);
  });

  test('a result over the cap is truncated to TOOL_RESULT_MAX_BYTES', async () => {
    const user = await ctx.h.newUser('big');
    for (const i of [1, 2, 3]) {
      const res = await ctx.h
        .http()
        .post('/api/v1/memory')
        .set(user.auth)
        .send({ kind: 'fact', content: `Gardening note ${i}: ${'tomatoes like sun and water. '.repeat(30)}` });
      expect(res.status).toBe(200);
    }
    const conversationId = await conversation(user);
    script(call('call_big', 'memory_search', { query: 'tomatoes gardening' }));
    const res = await send(user, conversationId, 'What about my garden?');
    const result = res.body.reply.parts.find((p: { type: string }) => p.type === 'tool-result');
    expect(result).toMatchObject({ outcome: 'success', truncated: true });
    expect(Buffer.byteLength(result.output)).toBeLessThanOrEqual(512);
    expect(result.output).toMatch(/\[truncated: the result was longer than the cap\]$/);
  });
});

describe('approvals', () => {
  test('approve: the call runs with the approved arguments, once, and the turn continues', async () => {
    const hook = await subscribe(ctx.h, ctx.alice, servers.receiver.url, ['approval.requested']);
    const args = { title: 'Launch checklist', content: '- book the room' };
    const before = (await notes(ctx.alice)).length;
    const { reply, approvalId, conversationId } = await pausedTurn(ctx.alice, args);
    expect(reply.usage).toMatchObject({ inputTokens: 10, outputTokens: 5 });

    // Listed, and announced by webhook.
    const listed = await ctx.h.http().get('/api/v1/approvals').set(ctx.alice.auth);
    expect(listed.status).toBe(200);
    expect(listed.body.approvals[0]).toMatchObject({
      approvalId,
      conversationId,
      messageId: reply.messageId,
      toolCallId: 'call_w',
      toolName: 'notes_create',
      arguments: args,
      status: 'pending',
      decidedAt: null,
    });
    expect(listed.body.approvals[0].argumentsDigest).toMatch(/^[0-9a-f]{64}$/);
    const delivered = await eventually(() =>
      servers.receiver.received.find(
        (r) => JSON.parse(r.body).type === 'approval.requested' && JSON.parse(r.body).data.approvalId === approvalId,
      ),
    );
    expect(verify(hook.secret, delivered).data).toMatchObject({ approvalId, toolName: 'notes_create', arguments: args });

    // A paused turn is not generating: the lease recovery leaves it alone.
    await ctx.h.runtime.replies.runOnce();
    expect((await ctx.h.http().get('/api/v1/approvals').query({ approvalId }).set(ctx.alice.auth)).body.approval.status).toBe('pending');

    const decided = await decide(ctx.alice, {
      approvalId,
      decision: 'approve',
      arguments: { content: '- book the room', title: 'Launch checklist' },
    });
    expect(decided.status).toBe(200);
    expect(decided.body.approval).toMatchObject({ approvalId, status: 'approved', decidedAt: expect.any(Number) });
    expect(decided.body.reply).toMatchObject({ messageId: reply.messageId, status: 'complete', content: 'Done.' });
    const result = decided.body.reply.parts.find((p: { type: string }) => p.type === 'tool-result');
    expect(result).toMatchObject({ toolCallId: 'call_w', outcome: 'success' });
    const created = await notes(ctx.alice);
    expect(created).toHaveLength(before + 1);
    expect(created[0]).toMatchObject(args);
    expect(await approvalAudits(approvalId)).toEqual([
      expect.objectContaining({
        actor_user_id: ctx.alice.userId,
        resource_type: 'approval',
        outcome: 'success',
        metadata: expect.objectContaining({ decision: 'approve', toolName: 'notes_create' }),
      }),
    ]);

    // Single use: a replay is refused and runs nothing.
    const replay = await decide(ctx.alice, { approvalId, decision: 'approve' });
    expect(replay.status).toBe(409);
    expect(replay.body.code).toBe('conflict');
    expect(await notes(ctx.alice)).toHaveLength(before + 1);
    expect(await approvalAudits(approvalId)).toHaveLength(1);
    expect(
      (await ctx.h.http().get('/api/v1/approvals').set(ctx.alice.auth)).body.approvals.map((a: { approvalId: string }) => a.approvalId),
    ).not.toContain(approvalId);
  });

  test('another user, changed arguments and a bad decision are refused and run nothing', async () => {
    const args = { title: 'Secret plan', content: 'x' };
    const { approvalId, reply } = await pausedTurn(ctx.alice, args);
    const count = (await notes(ctx.alice)).length;

    const other = await decide(ctx.bob, { approvalId, decision: 'approve' });
    expect(other.status).toBe(404);
    expect((await ctx.h.http().get('/api/v1/approvals').query({ approvalId }).set(ctx.bob.auth)).status).toBe(404);
    expect((await ctx.h.http().get('/api/v1/approvals').set(ctx.bob.auth)).body.approvals).toEqual([]);

    const changed = await decide(ctx.alice, { approvalId, decision: 'approve', arguments: { title: 'Secret plan', content: 'y' } });
    expect(changed.status).toBe(409);
    expect(changed.body.error).toMatch(/digest/);

    const bad = await decide(ctx.alice, { approvalId, decision: 'maybe' });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('invalid_request');

    expect(await notes(ctx.alice)).toHaveLength(count);
    expect(await approvalAudits(approvalId)).toEqual([]);
    const pending = await ctx.h.http().get('/api/v1/approvals').query({ approvalId }).set(ctx.alice.auth);
    expect(pending.body.approval.status).toBe('pending');
    const stored = await ctx.h
      .http()
      .get('/api/v1/conversations/messages')
      .query({ conversationId: reply.conversationId })
      .set(ctx.alice.auth);
    expect(stored.body.messages[0]).toMatchObject({ status: 'awaiting_approval' });

    // It can still be decided by its owner.
    expect((await decide(ctx.alice, { approvalId, decision: 'deny' })).status).toBe(200);
  });

  test('deny: the tool does not run, the model is told, the turn completes; one audit event', async () => {
    const before = servers.model.requests.length;
    const { approvalId } = await pausedTurn(ctx.alice, { title: 'Not this', content: 'no' });
    const count = (await notes(ctx.alice)).length;
    const res = await decide(ctx.alice, { approvalId, decision: 'deny' });
    expect(res.status).toBe(200);
    expect(res.body.approval.status).toBe('denied');
    expect(res.body.reply).toMatchObject({ status: 'complete', content: 'Done.' });
    expect(res.body.reply.parts.find((p: { type: string }) => p.type === 'tool-result')).toMatchObject({
      outcome: 'denied',
      isError: true,
    });
    const told = servers.model.requests.slice(before)[1]!.body.messages.find((m) => m.role === 'tool');
    expect(told!.content).toMatch(/denied/);
    expect(await notes(ctx.alice)).toHaveLength(count);
    expect(await approvalAudits(approvalId)).toEqual([
      expect.objectContaining({ metadata: expect.objectContaining({ decision: 'deny' }) }),
    ]);
    expect((await decide(ctx.alice, { approvalId, decision: 'approve' })).status).toBe(409);
    expect(await notes(ctx.alice)).toHaveLength(count);
  });

  test('expiry: a late decision is refused (410) and runs nothing; the paused reply ends as failed', async () => {
    const hook = await subscribe(ctx.h, ctx.bob, servers.receiver.url, ['chat.failed']);
    const { approvalId, reply } = await pausedTurn(ctx.bob, { title: 'Too late', content: 'z' });
    await db()
      .updateTable('tool_approvals')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', approvalId)
      .execute();
    const late = await decide(ctx.bob, { approvalId, decision: 'approve' });
    expect(late.status).toBe(410);
    expect(late.body.code).toBe('approval_expired');
    expect(await notes(ctx.bob)).toEqual([]);

    await ctx.h.runtime.replies.runOnce();
    const stored = await ctx.h
      .http()
      .get('/api/v1/conversations/messages')
      .query({ conversationId: reply.conversationId })
      .set(ctx.bob.auth);
    expect(stored.body.messages[0]).toMatchObject({
      messageId: reply.messageId,
      status: 'failed',
      errorCode: 'approval_expired',
      usage: null,
    });
    expect((await ctx.h.http().get('/api/v1/approvals').query({ approvalId }).set(ctx.bob.auth)).body.approval.status).toBe('expired');
    const failed = await eventually(() =>
      servers.receiver.received.find(
        (r) => JSON.parse(r.body).type === 'chat.failed' && JSON.parse(r.body).data.messageId === reply.messageId,
      ),
    );
    expect(verify(hook.secret, failed).data).toMatchObject({ errorCode: 'approval_expired' });
    expect((await decide(ctx.bob, { approvalId, decision: 'approve' })).status).toBe(410);
    expect(await approvalAudits(approvalId)).toEqual([]);
  });

  test('a streamed turn ends with approval-required', async () => {
    const conversationId = await conversation(ctx.alice);
    script(call('call_sw', 'automation_run', { automationId: 'a1' }));
    const res = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Run it.', stream: true })
      .buffer(true)
      .parse(textBody);
    const events = parseEvents(res.body as string);
    expect(events.map((e) => e.event)).toEqual(['message', 'tool-call', 'approval-required']);
    expect(events[2]!.data).toMatchObject({
      approval: { toolName: 'automation_run', arguments: { automationId: 'a1' }, status: 'pending' },
      message: { status: 'awaiting_approval' },
    });
    // Approving an automation that is not the caller's: the tool's refusal is the model's to read.
    const approvalId = (events[2]!.data.approval as { approvalId: string }).approvalId;
    const res2 = await decide(ctx.alice, { approvalId, decision: 'approve' });
    expect(res2.body.reply.parts.find((p: { type: string }) => p.type === 'tool-result')).toMatchObject({
      outcome: 'error',
      output: expect.stringMatching(/not found/i),
    });
  });
});

describe('the development provider', () => {
  test('calls the tool a "/tool <name> <json>" line names, then answers quoting its result; approval flow offline', async () => {
    const h = await startHarness({});
    try {
      const user = await h.newUser();
      const created = await h.http().post('/api/v1/conversations').set(user.auth).send({});
      const conversationId = created.body.conversation.conversationId;
      const res = await h
        .http()
        .post('/api/v1/conversations/messages')
        .set(user.auth)
        .send({ conversationId, content: 'List them.\n/tool projects_list {"limit": 5}' });
      expect(res.status).toBe(200);
      expect(res.body.reply).toMatchObject({
        status: 'complete',
        model: 'development',
        content: 'Development model (no AI provider is configured). The tool projects_list returned: []',
      });
      expect(res.body.reply.parts[0]).toMatchObject({
        type: 'tool-call',
        toolCallId: 'call_1',
        toolName: 'projects_list',
        arguments: { limit: 5 },
      });

      const paused = await h
        .http()
        .post('/api/v1/conversations/messages')
        .set(user.auth)
        .send({ conversationId, content: '/tool notes_create {"title":"Offline","content":"works"}' });
      expect(paused.body.reply.status).toBe('awaiting_approval');
      const approvalId = paused.body.reply.parts[0].approvalId;
      const decided = await h.http().post('/api/v1/approvals/decide').set(user.auth).send({ approvalId, decision: 'approve' });
      expect(decided.status).toBe(200);
      expect(decided.body.reply.status).toBe('complete');
      expect(decided.body.reply.content).toMatch(/The tool notes_create returned: \{"noteId":".+","title":"Offline"\}/);
    } finally {
      await h.close();
    }
  });
});

describe('metrics', () => {
  test('tool calls by tool and outcome, approval waits and time to first token (from the turns above)', async () => {
    const { metrics } = ctx.h.runtime;
    const calls = (await metrics.toolCalls.get()).values;
    const count = (tool: string, outcome: string) => calls.find((v) => v.labels.tool === tool && v.labels.outcome === outcome)?.value ?? 0;
    expect(count('notes_search', 'success')).toBeGreaterThan(0);
    expect(count('memory_save', 'denied')).toBeGreaterThan(0);
    expect(count('notes_create', 'denied')).toBeGreaterThan(0);
    expect(count('unknown', 'not_found')).toBeGreaterThan(0);
    expect(count('no_such_tool', 'not_found')).toBe(0);
    const waits = (await metrics.approvalWait.get()).values;
    expect(
      waits.find((v) => v.metricName === 'chat_tool_approval_wait_seconds_count' && v.labels.decision === 'approve')?.value,
    ).toBeGreaterThan(0);
    const firstToken = (await metrics.firstToken.get()).values;
    expect(firstToken.find((v) => v.metricName === 'chat_model_first_token_seconds_count')?.value).toBeGreaterThan(0);
  });
});
