import type { Client } from '@modelcontextprotocol/sdk/client/index.js' with { 'resolution-mode': 'import' };
import { storeFile } from '../helpers/files';
import { anotherInstance, startHarness, type TestUser, useHarnessWith } from '../helpers/harness';

const ctx = useHarnessWith(() => ({ BUILTIN_TOOL_POLICIES: 'memory_save=deny' }), 'alice', 'bob');

type CallResult = { content: Array<{ type: string; text: string }>; isError?: boolean; structuredContent?: Record<string, unknown> };

/** An MCP SDK client over Streamable HTTP to the harness's /mcp, with the user's bearer token. */
async function connect(user: TestUser, baseUrl = ctx.h.baseUrl): Promise<Client> {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers: user.auth } }));
  return client;
}

const clients: Client[] = [];
async function clientOf(user: TestUser): Promise<Client> {
  const client = await connect(user);
  clients.push(client);
  return client;
}
afterAll(async () => {
  for (const client of clients) await client.close();
});

const callTool = async (client: Client, name: string, args: Record<string, unknown>) =>
  (await client.callTool({ name, arguments: args })) as CallResult;

async function createNote(user: TestUser, title: string, content: string): Promise<string> {
  const res = await ctx.h.http().post('/api/v1/notes').set(user.auth).send({ title, content });
  expect(res.status).toBe(200);
  return res.body.note.noteId;
}

async function notesTitled(user: TestUser, title: string) {
  const res = await ctx.h.http().get('/api/v1/notes').set(user.auth);
  expect(res.status).toBe(200);
  return (res.body.notes as Array<{ title: string; noteId: string }>).filter((n) => n.title === title);
}

const decide = (user: TestUser, body: Record<string, unknown>) =>
  ctx.h.http().post('/api/v1/approvals/mcp/decide').set(user.auth).send(body);

describe('the workspace as an MCP server', () => {
  test('lists the caller’s tools with their schemas (deny left out), and their skills as prompts', async () => {
    const client = await clientOf(ctx.alice);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'knowledge_search',
        'notes_search',
        'notes_read',
        'notes_create',
        'memory_search',
        'file_read',
        'projects_list',
        'automation_run',
        'approval_status',
      ]),
    );
    expect(names).not.toContain('memory_save'); // deny (BUILTIN_TOOL_POLICIES)
    const registry = await ctx.h.http().get('/api/v1/tools').set(ctx.alice.auth);
    const notesCreate = registry.body.tools.find((t: { name: string }) => t.name === 'notes_create');
    expect(tools.find((t) => t.name === 'notes_create')?.inputSchema).toEqual(notesCreate.inputSchema);
    expect(tools.find((t) => t.name === 'notes_search')?.annotations).toMatchObject({ readOnlyHint: true });

    const skill = await ctx.h
      .http()
      .post('/api/v1/skills')
      .set(ctx.alice.auth)
      .send({ name: 'Summarize', instructions: 'Write five bullets.' });
    expect(skill.status).toBe(200);
    const { prompts } = await client.listPrompts();
    expect(prompts).toEqual([expect.objectContaining({ name: skill.body.skill.skillId, title: 'Summarize' })]);
    const prompt = await client.getPrompt({ name: skill.body.skill.skillId });
    expect(prompt.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'Write five bullets.' } }]);
    // Another user's client sees none of it.
    const bobs = await clientOf(ctx.bob);
    expect((await bobs.listPrompts()).prompts).toEqual([]);
    await expect(bobs.getPrompt({ name: skill.body.skill.skillId })).rejects.toThrow(/not found/);
  });

  test('runs a read tool on the caller’s own data only', async () => {
    const noteId = await createNote(ctx.alice, 'Launch plan', 'Book the zeppelin hangar.');
    const client = await clientOf(ctx.alice);
    const read = await callTool(client, 'notes_read', { noteId });
    expect(read.isError).toBe(false);
    expect(JSON.parse(read.content[0]!.text)).toMatchObject({ noteId, title: 'Launch plan', content: 'Book the zeppelin hangar.' });
    const found = await callTool(client, 'notes_search', { query: 'zeppelin' });
    expect(JSON.parse(found.content[0]!.text)).toEqual([expect.objectContaining({ noteId })]);

    const bobs = await clientOf(ctx.bob);
    expect(JSON.parse((await callTool(bobs, 'notes_search', { query: 'zeppelin' })).content[0]!.text)).toEqual([]);
    const refused = await callTool(bobs, 'notes_read', { noteId });
    expect(refused).toMatchObject({ isError: true });
    expect(refused.content[0]!.text).toMatch(/not found/i);
  });

  test('notes and files are resources, a page at a time, the caller’s own only', async () => {
    const carol = await ctx.h.newUser('carol');
    const ids: string[] = [];
    for (let i = 0; i < 52; i += 1) ids.push(await createNote(carol, `Note ${i}`, `Text ${i}`));
    const client = await clientOf(carol);
    const first = await client.listResources();
    expect(first.resources).toHaveLength(50);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await client.listResources({ cursor: first.nextCursor });
    const uris = [...first.resources, ...second.resources].map((r) => r.uri);
    expect(new Set(uris)).toEqual(new Set(ids.map((id) => `workspace://notes/${id}`)));
    expect(second.nextCursor).toBeUndefined();
    const read = await client.readResource({ uri: `workspace://notes/${ids[3]}` });
    expect(read.contents).toEqual([{ uri: `workspace://notes/${ids[3]}`, mimeType: 'text/markdown', text: 'Text 3' }]);
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(['workspace://notes/{noteId}', 'workspace://files/{fileId}']);

    const bobs = await clientOf(ctx.bob);
    expect((await bobs.listResources()).resources.map((r) => r.uri)).not.toContain(`workspace://notes/${ids[3]}`);
    await expect(bobs.readResource({ uri: `workspace://notes/${ids[3]}` })).rejects.toThrow(/not found/i);
    await expect(client.listResources({ cursor: 'not-ours' })).rejects.toThrow(/cursor/);
  });

  test('a file’s text is a tool and a resource, for its owner and those it is shared with only', async () => {
    const erin = await ctx.h.newUser('erin');
    const frank = await ctx.h.newUser('frank');
    const file = await storeFile(
      ctx.h,
      erin,
      'trip.md',
      'text/markdown',
      Buffer.from('# Trip\n\nThe ferry leaves at dawn from the marmalade pier.'),
    );
    expect((await ctx.h.http().post('/api/v1/files/ingest-document').set(erin.auth).send({ fileId: file.fileId })).status).toBe(200);
    expect(
      (
        await ctx.h
          .http()
          .patch('/api/v1/files/share')
          .set(erin.auth)
          .send({ fileId: file.fileId, add: [frank.userId] })
      ).status,
    ).toBe(200);
    const uri = `workspace://files/${file.fileId}`;

    const erins = await clientOf(erin);
    const read = await callTool(erins, 'file_read', { fileId: file.fileId });
    expect(JSON.parse(read.content[0]!.text)).toMatchObject({
      fileId: file.fileId,
      name: 'trip.md',
      text: expect.stringContaining('marmalade pier'),
    });
    const found = await callTool(erins, 'knowledge_search', { query: 'marmalade', sources: ['files'] });
    expect(JSON.parse(found.content[0]!.text)).toEqual([expect.objectContaining({ source: 'file', fileId: file.fileId })]);
    expect((await erins.listResources()).resources).toContainEqual(expect.objectContaining({ uri, name: 'trip.md' }));

    const franks = await clientOf(frank);
    expect((await franks.listResources()).resources.map((r) => r.uri)).toEqual([uri]);
    const shared = await franks.readResource({ uri });
    expect(shared.contents[0]).toMatchObject({ uri, mimeType: 'text/plain', text: expect.stringContaining('ferry leaves at dawn') });

    const bobs = await clientOf(ctx.bob);
    expect((await bobs.listResources()).resources.map((r) => r.uri)).not.toContain(uri);
    await expect(bobs.readResource({ uri })).rejects.toThrow(/not found/i);
    expect((await callTool(bobs, 'file_read', { fileId: file.fileId })).isError).toBe(true);
    expect(JSON.parse((await callTool(bobs, 'knowledge_search', { query: 'marmalade' })).content[0]!.text)).toEqual([]);
    await expect(bobs.readResource({ uri: 'workspace://mail/1' })).rejects.toThrow(/not found/);
  });

  test('two instances deciding one approval at once run the call once', async () => {
    const client = await clientOf(ctx.alice);
    const args = { title: 'Decided on two instances', content: 'once' };
    const asked = await callTool(client, 'notes_create', args);
    const approvalId = (asked.structuredContent!.approval as { approvalId: string }).approvalId;
    const other = await anotherInstance(ctx.h);
    try {
      // One decision over HTTP on this instance, one through the other instance's service, at once.
      const [here, there] = await Promise.all([
        decide(ctx.alice, { approvalId, decision: 'approve' }).then((res) => res.status),
        other.services.mcpWorkspace.approvals
          .decide({ userId: ctx.alice.userId, requestId: null }, { approvalId, decision: 'approve' })
          .then(
            () => 200,
            (error: { status?: number }) => error.status,
          ),
      ]);
      expect([here, there].sort()).toEqual([200, 409]);
    } finally {
      await other.close();
    }
    expect(await notesTitled(ctx.alice, args.title)).toHaveLength(1);
    expect(JSON.parse((await callTool(client, 'notes_create', args)).content[0]!.text)).toMatchObject({ title: args.title });
  });

  test('a write tool waits for approval, runs once when approved, and the repeated call answers its outcome', async () => {
    const client = await clientOf(ctx.alice);
    const args = { title: 'Approved via MCP', content: '- once' };
    const asked = await callTool(client, 'notes_create', args);
    expect(asked.isError).toBe(false);
    expect(asked.content[0]!.text).toMatch(/awaits the user's approval/);
    const approvalId = (asked.structuredContent!.approval as { approvalId: string }).approvalId;
    // Asking again before the decision: the same approval, nothing runs.
    const again = await callTool(client, 'notes_create', args);
    expect((again.structuredContent!.approval as { approvalId: string }).approvalId).toBe(approvalId);
    expect(await notesTitled(ctx.alice, args.title)).toHaveLength(0);

    const pending = await ctx.h.http().get('/api/v1/approvals/mcp').set(ctx.alice.auth);
    expect(pending.status).toBe(200);
    expect(pending.body.approvals).toEqual([
      expect.objectContaining({ approvalId, toolName: 'notes_create', arguments: args, status: 'pending' }),
    ]);
    // Chat's approvals are not these, and another user sees none.
    expect((await ctx.h.http().get('/api/v1/approvals').set(ctx.alice.auth)).body.approvals).toEqual([]);
    expect((await ctx.h.http().get('/api/v1/approvals/mcp').set(ctx.bob.auth)).body.approvals).toEqual([]);
    expect((await ctx.h.http().get('/api/v1/approvals/mcp').query({ approvalId }).set(ctx.bob.auth)).status).toBe(404);
    expect((await decide(ctx.bob, { approvalId, decision: 'approve' })).status).toBe(404);
    expect((await ctx.h.http().post('/api/v1/approvals/decide').set(ctx.alice.auth).send({ approvalId, decision: 'approve' })).status).toBe(
      404,
    );
    expect((await decide(ctx.alice, { approvalId, decision: 'approve', arguments: { ...args, title: 'Other' } })).status).toBe(409);

    // Two decisions at once: one runs the tool, the other is refused.
    const [a, b] = await Promise.all([
      decide(ctx.alice, { approvalId, decision: 'approve' }),
      decide(ctx.alice, { approvalId, decision: 'approve' }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 409]);
    const decided = a.status === 200 ? a : b;
    expect(decided.body.approval).toMatchObject({ status: 'approved', outcome: { outcome: 'success', isError: false }, delivered: false });
    expect(await notesTitled(ctx.alice, args.title)).toHaveLength(1);

    const status = await callTool(client, 'approval_status', { approvalId });
    expect(status.structuredContent!.approval).toMatchObject({ status: 'approved', outcome: { outcome: 'success' } });
    const outcome = await callTool(client, 'notes_create', args);
    expect(outcome.isError).toBe(false);
    expect(JSON.parse(outcome.content[0]!.text)).toMatchObject({ title: args.title, noteId: expect.any(String) });
    expect(await notesTitled(ctx.alice, args.title)).toHaveLength(1);
    expect((await decide(ctx.alice, { approvalId, decision: 'approve' })).status).toBe(409);
    const audits = await ctx.h.runtime.database.db
      .selectFrom('audit_events')
      .selectAll()
      .where('action', '=', 'tool.approval.decide')
      .where('resource_id', '=', approvalId)
      .execute();
    expect(audits).toHaveLength(1);

    // Given once: the next identical call asks again.
    const anew = await callTool(client, 'notes_create', args);
    expect((anew.structuredContent!.approval as { approvalId: string }).approvalId).not.toBe(approvalId);
  });

  test('an approval left undecided expires: it cannot be decided, and the call asks again', async () => {
    const client = await clientOf(ctx.alice);
    const args = { title: 'Expired via MCP', content: 'late' };
    const asked = await callTool(client, 'notes_create', args);
    const approvalId = (asked.structuredContent!.approval as { approvalId: string }).approvalId;
    // Its time is up (set in the database rather than waited for).
    await ctx.h.runtime.database.db
      .updateTable('tool_approvals')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', approvalId)
      .execute();
    const refused = await decide(ctx.alice, { approvalId, decision: 'approve' });
    expect(refused.status).toBe(410);
    expect(refused.body.code).toBe('approval_expired');
    const read = await ctx.h.http().get('/api/v1/approvals/mcp').query({ approvalId }).set(ctx.alice.auth);
    expect(read.body.approval).toMatchObject({ status: 'expired', outcome: null });
    expect((await ctx.h.http().get('/api/v1/approvals/mcp').set(ctx.alice.auth)).body.approvals).not.toContainEqual(
      expect.objectContaining({ approvalId }),
    );
    const anew = await callTool(client, 'notes_create', args);
    expect((anew.structuredContent!.approval as { approvalId: string }).approvalId).not.toBe(approvalId);
    expect(await notesTitled(ctx.alice, args.title)).toHaveLength(0);
    // Another user's client cannot read it either.
    const bobs = await clientOf(ctx.bob);
    expect(await callTool(bobs, 'approval_status', { approvalId })).toMatchObject({ isError: true });
  });

  test('a denied call answers denied and does not run', async () => {
    const client = await clientOf(ctx.alice);
    const args = { title: 'Denied via MCP', content: 'no' };
    const asked = await callTool(client, 'notes_create', args);
    const approvalId = (asked.structuredContent!.approval as { approvalId: string }).approvalId;
    const denied = await decide(ctx.alice, { approvalId, decision: 'deny' });
    expect(denied.status).toBe(200);
    expect(denied.body.approval).toMatchObject({ status: 'denied', outcome: null });
    const answer = await callTool(client, 'notes_create', args);
    expect(answer.isError).toBe(true);
    expect(answer.content[0]!.text).toMatch(/denied/);
    expect(await notesTitled(ctx.alice, args.title)).toHaveLength(0);
  });

  test('an unknown tool and arguments off the schema are MCP errors', async () => {
    const client = await clientOf(ctx.alice);
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toThrow(/not found/);
    await expect(client.callTool({ name: 'memory_save', arguments: { content: 'x' } })).rejects.toThrow(/not found/);
    await expect(client.callTool({ name: 'notes_read', arguments: { noteId: 7 } })).rejects.toThrow(/Invalid arguments/);
    await expect(client.callTool({ name: 'notes_create', arguments: { title: 'x' } })).rejects.toThrow(/content is required/);
  });

  test('a personal access token without write gets a tool error naming the scope; one without read cannot connect', async () => {
    const mint = async (scopes: string[]) => {
      const res = await ctx.h.http().post('/api/v1/access-tokens').set(ctx.alice.auth).send({ name: 'mcp', scopes }).expect(200);
      return { ...ctx.alice, auth: { Authorization: `Bearer ${res.body.token as string}` } };
    };
    const client = await clientOf(await mint(['read']));
    const refused = await callTool(client, 'notes_create', { title: 'Scoped', content: 'x' });
    expect(refused.isError).toBe(true);
    expect(refused.content[0]).toMatchObject({ type: 'text', text: expect.stringContaining('"write"') });
    const read = await callTool(client, 'projects_list', {});
    expect(read.isError).toBe(false);
    expect((await ctx.h.http().get('/api/v1/approvals/mcp').set(ctx.alice.auth)).body.approvals).not.toContainEqual(
      expect.objectContaining({ arguments: { title: 'Scoped', content: 'x' } }),
    );
    const chatOnly = await mint(['chat']);
    const rejected = await ctx.h
      .http()
      .post('/mcp')
      .set('Accept', 'application/json, text/event-stream')
      .set(chatOnly.auth)
      .send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(rejected.status).toBe(403);
    expect(rejected.body).toMatchObject({ code: 'insufficient_scope', scope: 'read' });
  });

  test('a body that is not JSON-RPC is a 400, no token a 401', async () => {
    const post = () => ctx.h.http().post('/mcp').set('Accept', 'application/json, text/event-stream');
    const notJson = await post().set(ctx.alice.auth).set('Content-Type', 'application/json').send('{"jsonrpc":');
    expect(notJson.status).toBe(400);
    expect((await post().set(ctx.alice.auth).send([])).status).toBe(400);
    expect((await post().set(ctx.alice.auth).send({ id: 1, method: 'tools/list' })).status).toBe(400);
    const anonymous = await post().send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.code).toBe('unauthenticated');
    expect((await ctx.h.http().get('/mcp').set(ctx.alice.auth)).status).toBe(405);
    expect((await ctx.h.http().get('/api/v1/approvals/mcp').query({ limit: 500 }).set(ctx.alice.auth)).status).toBe(400);
    expect((await decide(ctx.alice, { approvalId: 'x', decision: 'maybe' })).status).toBe(400);
  });
});

describe('with the capability mcpServer off', () => {
  test('/mcp and its approvals answer 403 capability_disabled', async () => {
    const h = await startHarness({ CAPABILITY_MCP_SERVER: 'false' });
    try {
      const user = await h.newUser('dora');
      const res = await h
        .http()
        .post('/mcp')
        .set(user.auth)
        .set('Accept', 'application/json, text/event-stream')
        .send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ code: 'capability_disabled', capability: 'mcpServer' });
      expect((await h.http().get('/api/v1/approvals/mcp').set(user.auth)).status).toBe(403);
    } finally {
      await h.close();
    }
  });
});
