import { type TestUser, textBody, useHarnessWith } from '../helpers/harness';
import { startOAuthMcpServer, type TestOAuthMcpServer } from '../helpers/mcp-oauth-server';
import { type Behaviour, parseEvents, scriptAnswers, useFakeModelAndReceiver } from '../helpers/openai-server';

// An MCP server on loopback that requires OAuth (the MCP authorization spec, with the SDK's own
// authorization server): registered with `authentication: oauth`, connected through the
// integrations flow (discovery, dynamic client registration, PKCE, the resource indicator), and
// its tool called in a chat turn with the user's token; a missing connection is a tool result
// that says to connect, never a failed turn.
let server: TestOAuthMcpServer;
beforeAll(async () => {
  server = await startOAuthMcpServer();
});
afterAll(() => server.close());

const servers = useFakeModelAndReceiver();
const ctx = useHarnessWith(
  () => ({ MODEL_PROVIDER_BASE_URL: servers.model.baseUrl, MODEL_PROVIDER_MODELS: 'test-model', OUTBOUND_ALLOW_LOOPBACK: 'true' }),
  'alice',
  'bob',
);

const script = (...answers: Behaviour[]) => scriptAnswers(servers.model, ...answers);

async function register(user: TestUser, name: string) {
  const res = await ctx.h
    .http()
    .post('/api/v1/mcp-servers')
    .set(user.auth)
    .send({ name, url: server.mcpUrl, transport: 'streamable_http', authentication: 'oauth', defaultToolPolicy: 'allow' });
  expect(res.status).toBe(200);
  return res.body.server as { serverId: string; toolPrefix: string; status: string; lastError: string | null; integrationId: string };
}

/** The user's browser signed in to the web app (`POST /auth/session`): its session cookie. */
async function signedIn(user: TestUser): Promise<string> {
  const res = await ctx.h.http().post('/auth/session').set(user.auth);
  const header = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('service_session='));
  if (!header) throw new Error('no session cookie');
  return header.split(';')[0] as string;
}

/** Waits until `condition` holds (checked every 20 ms, for at most a minute). */
async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met within a minute');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function serverOf(user: TestUser, serverId: string) {
  const res = await ctx.h.http().get('/api/v1/mcp-servers').query({ serverId }).set(user.auth);
  expect(res.status).toBe(200);
  return res.body.server as { status: string; lastError: string | null; tools: Array<{ name: string }> };
}

/** Connects the user's server, then waits for the catalog read the connection starts (in the background) to make it active. */
async function connectServer(user: TestUser, integrationId: string): Promise<URL> {
  const url = await authorizeInBrowser(user, integrationId);
  await waitFor(async () => (await serverOf(user, integrationId.slice('mcp:'.length))).status === 'active');
  return url;
}

/** The authorization URL, the user's signed-in browser at the authorization server, the callback. */
async function authorizeInBrowser(user: TestUser, integrationId: string): Promise<URL> {
  const started = await ctx.h.http().post('/api/v1/integrations/connect').set(user.auth).send({ integrationId });
  expect(started.status).toBe(200);
  const url = new URL(started.body.authorization.authorizationUrl);
  const approved = await fetch(url, { redirect: 'manual' });
  expect(approved.status).toBe(302);
  const location = new URL(approved.headers.get('location') as string);
  const done = await ctx.h
    .http()
    .get(`${location.pathname}${location.search}`)
    .set('Cookie', await signedIn(user));
  expect(done.status).toBe(200);
  expect(done.text).toContain('Connected');
  return url;
}

async function turn(user: TestUser, tool: string, text: string) {
  const conversation = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({});
  script(
    { kind: 'tool-calls', calls: [{ id: 'call_o1', name: tool, arguments: JSON.stringify({ text }) }] },
    { kind: 'reply', chunks: ['Done.'] },
  );
  const res = await ctx.h
    .http()
    .post('/api/v1/conversations/messages')
    .set(user.auth)
    .send({ conversationId: conversation.body.conversation.conversationId, content: 'Echo it.', stream: true })
    .buffer(true)
    .parse(textBody);
  expect(res.status).toBe(200);
  return parseEvents(res.body as string);
}

describe('an MCP server that requires OAuth', () => {
  test("is registered, connected through the flow, and its tool called in a chat turn with the user's token", async () => {
    const saved = await register(ctx.alice, 'Tracker');
    const integrationId = `mcp:${saved.serverId}`;
    expect(saved).toMatchObject({ integrationId, status: 'error' });
    expect(saved.lastError).toContain(`POST /api/v1/integrations/connect {"integrationId":"${integrationId}"}`);

    // It is in Alice's catalog, not connected; not in Bob's, and Bob cannot connect it.
    const catalog = await ctx.h.http().get('/api/v1/integrations').set(ctx.alice.auth);
    expect(catalog.body.integrations).toEqual([
      { integrationId, kind: 'mcp_server', name: 'Tracker', serverId: saved.serverId, scopes: [], connection: null },
    ]);
    expect((await ctx.h.http().get('/api/v1/integrations').set(ctx.bob.auth)).body.integrations).toEqual([]);
    expect((await ctx.h.http().post('/api/v1/integrations/connect').set(ctx.bob.auth).send({ integrationId })).status).toBe(404);
    expect((await ctx.h.http().get('/api/v1/integrations').query({ integrationId }).set(ctx.bob.auth)).status).toBe(404);

    // Connecting discovers the authorization server, registers a client, and asks with PKCE and the resource.
    const url = await connectServer(ctx.alice, integrationId);
    expect(server.clients).toHaveLength(1);
    expect(server.clients[0]).toMatchObject({
      client_name: 'AI Workspace Service',
      redirect_uris: ['http://localhost:8080/integrations/callback'],
      token_endpoint_auth_method: 'none',
    });
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      client_id: server.clients[0]!.client_id,
      code_challenge_method: 'S256',
      resource: server.mcpUrl,
      scope: 'tools',
    });
    expect(server.resources.at(-1)).toBe(server.mcpUrl);

    // The connection made the server read its catalog with the token.
    const after = await ctx.h.http().get('/api/v1/mcp-servers').query({ serverId: saved.serverId }).set(ctx.alice.auth);
    expect(after.body.server).toMatchObject({ status: 'active', lastError: null });
    expect(after.body.server.tools.map((t: { name: string }) => t.name)).toEqual(['echo']);
    const entry = (await ctx.h.http().get('/api/v1/integrations').query({ integrationId }).set(ctx.alice.auth)).body.integration;
    expect(entry).toMatchObject({
      scopes: ['tools'],
      connection: { status: 'connected', scopes: ['tools'], expiresAt: expect.any(Number) },
    });

    // A chat turn calls the tool; the MCP server receives the user's access token.
    const events = await turn(ctx.alice, `${saved.toolPrefix}__echo`, 'hello with oauth');
    const result = events.find((e) => e.event === 'tool-result')!.data as { part: { outcome: string; output: string } };
    expect(result.part).toMatchObject({ outcome: 'success', output: 'echo: hello with oauth' });
    expect(server.calls.at(-1)).toEqual({ text: 'hello with oauth', token: server.issued.at(-1) });
    for (const token of [...server.issued, ...server.refreshTokens]) {
      expect(JSON.stringify([catalog.body, after.body, entry, events])).not.toContain(token);
    }
  });

  test('an expiring token is refreshed on use; a missing connection is a tool result that says to connect', async () => {
    const saved = await register(ctx.bob, 'Short lived');
    const integrationId = `mcp:${saved.serverId}`;
    server.expiresIn = 20; // within the minute before expiry: refreshed when used
    try {
      await connectServer(ctx.bob, integrationId);
    } finally {
      server.expiresIn = 3600;
    }
    const refreshes = server.refreshes;
    const events = await turn(ctx.bob, `${saved.toolPrefix}__echo`, 'refreshed');
    expect((events.find((e) => e.event === 'tool-result')!.data as { part: { outcome: string } }).part.outcome).toBe('success');
    expect(server.refreshes).toBeGreaterThan(refreshes);
    expect(server.calls.at(-1)).toEqual({ text: 'refreshed', token: server.issued.at(-1) });

    // The server stops accepting the (unexpired) token: the call is made again once with a refreshed one.
    server.dropAccessTokens();
    const beforeRetry = server.refreshes;
    const retried = await turn(ctx.bob, `${saved.toolPrefix}__echo`, 'after a 401');
    expect((retried.find((e) => e.event === 'tool-result')!.data as { part: { outcome: string } }).part.outcome).toBe('success');
    expect(server.refreshes).toBe(beforeRetry + 1);
    expect(server.calls.at(-1)).toEqual({ text: 'after a 401', token: server.issued.at(-1) });

    // Disconnect: the refresh token is revoked at the server's authorization server.
    const latestRefresh = server.refreshTokens.at(-1) as string;
    const disconnected = await ctx.h.http().delete('/api/v1/integrations/connection').query({ integrationId }).set(ctx.bob.auth);
    expect(disconnected.body).toEqual({ integrationId, disconnected: true, revoked: true });
    expect(server.revoked).toContain(latestRefresh);

    // The next turn's call says to connect, and the turn completes.
    const calls = server.calls.length;
    const after = await turn(ctx.bob, `${saved.toolPrefix}__echo`, 'not connected');
    const part = (after.find((e) => e.event === 'tool-result')!.data as { part: { outcome: string; output: string; isError: boolean } })
      .part;
    expect(part).toMatchObject({ outcome: 'error', isError: true });
    expect(part.output).toContain(
      `Not connected to "Short lived": connect it with POST /api/v1/integrations/connect {"integrationId":"${integrationId}"}`,
    );
    expect((after.find((e) => e.event === 'done')!.data as { message: { status: string } }).message.status).toBe('complete');
    expect(server.calls.length).toBe(calls);
  });

  test('the callback answers at once; the servers read their catalogs afterwards', async () => {
    const saved = await register(ctx.bob, 'Slow');
    // The MCP endpoint holds every request: a callback that waited for the catalog would not answer.
    const release = server.hold();
    try {
      await authorizeInBrowser(ctx.bob, `mcp:${saved.serverId}`);
      expect((await serverOf(ctx.bob, saved.serverId)).status).toBe('error');
    } finally {
      release();
    }
    await waitFor(async () => (await serverOf(ctx.bob, saved.serverId)).status === 'active');
    expect((await serverOf(ctx.bob, saved.serverId)).tools.map((t) => t.name)).toEqual(['echo']);
  });

  test("a new URL or way of signing in forgets the server's connection and its authorizations under way", async () => {
    const db = ctx.h.runtime.database.db;
    const connectionOf = (integrationId: string) =>
      db.selectFrom('integration_connections').select('id').where('integration_id', '=', integrationId).execute();
    const update = (user: TestUser, body: Record<string, unknown>) => ctx.h.http().patch('/api/v1/mcp-servers').set(user.auth).send(body);
    const saved = await register(ctx.alice, 'Moving');
    const integrationId = `mcp:${saved.serverId}`;
    await connectServer(ctx.alice, integrationId);

    // Renaming it, or another user's attempt, keeps the connection.
    expect((await update(ctx.alice, { serverId: saved.serverId, name: 'Moved' })).status).toBe(200);
    expect((await update(ctx.bob, { serverId: saved.serverId, url: `${server.mcpUrl}?tenant=2` })).status).toBe(404);
    expect(await connectionOf(integrationId)).toHaveLength(1);

    // An authorization under way: approved at the authorization server, its callback not reached yet.
    const started = await ctx.h.http().post('/api/v1/integrations/connect').set(ctx.alice.auth).send({ integrationId });
    const approved = await fetch(new URL(started.body.authorization.authorizationUrl), { redirect: 'manual' });
    const location = new URL(approved.headers.get('location') as string);

    // A new URL: the token issued for the old one is revoked and deleted, never sent there.
    const refreshToken = server.refreshTokens.at(-1) as string;
    const moved = await update(ctx.alice, { serverId: saved.serverId, url: `${server.mcpUrl}?tenant=2` });
    expect(moved.status).toBe(200);
    expect(moved.body.server).toMatchObject({ status: 'error', integrationId });
    expect(moved.body.server.lastError).toContain(`Not connected to "Moved"`);
    expect(server.revoked).toContain(refreshToken);
    expect(await connectionOf(integrationId)).toEqual([]);
    expect(
      await db.selectFrom('integration_authorizations').select('state_hash').where('integration_id', '=', integrationId).execute(),
    ).toEqual([]);
    const late = await ctx.h
      .http()
      .get(`${location.pathname}${location.search}`)
      .set('Cookie', await signedIn(ctx.alice));
    expect(late.status).toBe(400);
    expect(await connectionOf(integrationId)).toEqual([]);
    const { events } = await ctx.h.runtime.services.audit.list(
      { action: 'integration.disconnect', actorUserId: ctx.alice.userId },
      { limit: 5, before: null },
    );
    expect(events[0]).toMatchObject({ resource_id: integrationId, outcome: 'success' });

    // Another way of signing in: the same.
    const other = await register(ctx.alice, 'Switching');
    await connectServer(ctx.alice, `mcp:${other.serverId}`);
    const otherRefresh = server.refreshTokens.at(-1) as string;
    const switched = await update(ctx.alice, { serverId: other.serverId, authentication: 'none' });
    expect(switched.status).toBe(200);
    expect(switched.body.server).toMatchObject({ authentication: 'none', integrationId: null });
    expect(server.revoked).toContain(otherRefresh);
    expect(await connectionOf(`mcp:${other.serverId}`)).toEqual([]);
  });

  test('deleting the server disconnects and revokes its connection', async () => {
    const saved = await register(ctx.alice, 'Temporary');
    await connectServer(ctx.alice, `mcp:${saved.serverId}`);
    const refreshToken = server.refreshTokens.at(-1) as string;
    expect((await ctx.h.http().delete('/api/v1/mcp-servers').query({ serverId: saved.serverId }).set(ctx.alice.auth)).status).toBe(200);
    expect(server.revoked).toContain(refreshToken);
    const rows = await ctx.h.runtime.database.db
      .selectFrom('integration_connections')
      .select('id')
      .where('integration_id', '=', `mcp:${saved.serverId}`)
      .execute();
    expect(rows).toEqual([]);
  });
});
