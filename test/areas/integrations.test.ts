import type { IncomingMessage } from 'node:http';
import { Writable } from 'node:stream';
import { OAuth2Server } from 'oauth2-mock-server';
import winston from 'winston';
import { type Harness, startHarness, type TestUser, sessionCookie } from '../helpers/harness';
import { startMcpServer, type TestMcpServer } from '../helpers/mcp-server';

// Integrations with operator-configured providers, against a real OAuth 2.0 / OpenID Connect
// server on loopback (oauth2-mock-server): `mock` by OIDC discovery, `plain` by configured
// endpoints. The "browser" is the test: it opens the authorization URL (the mock approves at once
// and redirects) and follows the redirect to the service's callback.

/** A logger keeping the service's warnings (where failures of the flow are logged), to check that no token is. */
function capturingLogger() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return {
    lines,
    logger: winston.createLogger({ level: 'warn', format: winston.format.json(), transports: [new winston.transports.Stream({ stream })] }),
  };
}

interface TokenRequest {
  grant_type: string;
  refresh_token?: string;
  code?: string;
  code_verifier?: string;
  redirect_uri?: string;
}

let oidc: OAuth2Server;
let mcp: TestMcpServer;
/** Every token request the provider answered, and what it issued. */
const tokenRequests: TokenRequest[] = [];
const grants: Array<{ grant: string; access: string; refresh: string }> = [];
const issued: string[] = [];
/** Revocation requests (their form bodies). */
const revocations: URLSearchParams[] = [];
/** Lifetime of the tokens issued from now on (seconds), whether refresh grants are refused, and whether a refresh token works once (rotation). */
const provider = { expiresIn: 3600, refuseRefresh: false, rotate: false };
/** Refresh tokens already used in a refresh grant. */
const spentRefreshTokens = new Set<string>();
const logs = capturingLogger();
let h: Harness;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  oidc = new OAuth2Server();
  await oidc.issuer.keys.generate('RS256');
  await oidc.start(0, '127.0.0.1');
  oidc.service.on(
    'beforeResponse',
    (response: { body: Record<string, unknown>; statusCode: number }, req: IncomingMessage & { body: TokenRequest }) => {
      tokenRequests.push({ ...req.body });
      if (req.body.grant_type === 'refresh_token' && provider.refuseRefresh) {
        response.statusCode = 400;
        response.body = { error: 'invalid_grant', error_description: 'the refresh token has been revoked' };
        return;
      }
      if (req.body.grant_type === 'refresh_token' && provider.rotate && spentRefreshTokens.has(String(req.body.refresh_token))) {
        response.statusCode = 400;
        response.body = { error: 'invalid_grant', error_description: 'the refresh token was already used' };
        return;
      }
      if (req.body.grant_type === 'refresh_token') spentRefreshTokens.add(String(req.body.refresh_token));
      response.body.expires_in = provider.expiresIn;
      grants.push({ grant: req.body.grant_type, access: String(response.body.access_token), refresh: String(response.body.refresh_token) });
      issued.push(String(response.body.access_token), String(response.body.refresh_token));
    },
  );
  oidc.service.on('beforeRevoke', (_response: unknown, req: IncomingMessage) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => revocations.push(new URLSearchParams(body)));
  });
  mcp = await startMcpServer();
  const issuer = oidc.issuer.url as string;
  h = await startHarness(
    {
      OUTBOUND_ALLOW_LOOPBACK: 'true',
      CAPABILITY_CACHE_MS: '0',
      INTEGRATIONS: JSON.stringify({
        mock: {
          name: 'Mock OIDC',
          issuer,
          clientId: 'workspace-client',
          clientSecret: 'workspace-secret-4b9e1f',
          scopes: ['openid', 'email'],
        },
        // Nothing listens there: its discovery fails.
        down: { name: 'Down', issuer: 'http://127.0.0.1:1', clientId: 'down-client' },
        plain: {
          name: 'Plain OAuth',
          authorizationUrl: `${issuer}/authorize`,
          tokenUrl: `${issuer}/token`,
          revocationUrl: `${issuer}/revoke`,
          clientId: 'plain-client',
          scopes: ['repo'],
        },
      }),
    },
    { logger: logs.logger },
  );
  alice = await h.newUser('alice');
  bob = await h.newUser('bob');
});

afterAll(async () => {
  await h?.close();
  await mcp?.close();
  await oidc?.stop();
});

/** Starts connecting: the authorization URL (and its state). */
async function connect(user: TestUser, integrationId: string): Promise<{ url: URL; state: string; expiresAt: number }> {
  const res = await h.http().post('/api/v1/integrations/connect').set(user.auth).send({ integrationId });
  expect(res.status).toBe(200);
  const url = new URL(res.body.authorization.authorizationUrl);
  return { url, state: url.searchParams.get('state') as string, expiresAt: res.body.authorization.expiresAt };
}

/** The user's browser signed in to the web app (`POST /auth/session`): its session cookie, one per user. */
const browsers = new Map<string, string>();
async function signedIn(user: TestUser): Promise<string> {
  let cookie = browsers.get(user.userId);
  if (cookie === undefined) {
    cookie = sessionCookie((await h.http().post('/auth/session').set(user.auth)).headers['set-cookie']);
    browsers.set(user.userId, cookie);
  }
  return cookie;
}

/** The user's signed-in browser arriving at the callback (`path`: its path and query). */
async function callbackIn(user: TestUser, path: string) {
  return h
    .http()
    .get(path)
    .set('Cookie', await signedIn(user));
}

/** The browser at the provider: it approves and redirects; answers the callback's path and query. */
async function approve(url: URL): Promise<string> {
  const res = await fetch(url, { redirect: 'manual' });
  expect(res.status).toBe(302);
  const location = new URL(res.headers.get('location') as string);
  expect(`${location.origin}${location.pathname}`).toBe('http://localhost:8080/integrations/callback');
  return `${location.pathname}${location.search}`;
}

async function catalogEntry(user: TestUser, integrationId: string) {
  const res = await h.http().get('/api/v1/integrations').query({ integrationId }).set(user.auth);
  expect(res.status).toBe(200);
  return res.body.integration;
}

/** No token the provider issued appears in `text`. */
function expectNoToken(text: string): void {
  for (const token of issued) expect(text).not.toContain(token);
  expect(text).not.toContain('workspace-secret-4b9e1f');
}

describe('integrations with configured providers', () => {
  test("the catalog lists the configured providers with the caller's connection state", async () => {
    const res = await h.http().get('/api/v1/integrations').set(alice.auth);
    expect(res.status).toBe(200);
    expect(res.body.integrations).toEqual([
      { integrationId: 'mock', kind: 'provider', name: 'Mock OIDC', serverId: null, scopes: ['openid', 'email'], connection: null },
      { integrationId: 'down', kind: 'provider', name: 'Down', serverId: null, scopes: [], connection: null },
      { integrationId: 'plain', kind: 'provider', name: 'Plain OAuth', serverId: null, scopes: ['repo'], connection: null },
    ]);
    expect((await h.http().get('/api/v1/integrations').query({ integrationId: 'nosuch' }).set(alice.auth)).status).toBe(404);
    expect((await h.http().get('/api/v1/integrations').query({ integrationId: 'Not An Id' }).set(alice.auth)).status).toBe(400);
    expect((await h.http().get('/api/v1/integrations')).status).toBe(401);
  });

  test('connect, callback (PKCE), the connection listed; tokens never in responses, storage in clear, or logs', async () => {
    const { url, state, expiresAt } = await connect(alice, 'mock');
    expect(url.origin).toBe(new URL(oidc.issuer.url as string).origin);
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      response_type: 'code',
      client_id: 'workspace-client',
      redirect_uri: 'http://localhost:8080/integrations/callback',
      scope: 'openid email',
      code_challenge_method: 'S256',
      code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    expect(state).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(expiresAt).toBeGreaterThan(Date.now());

    const callback = await approve(url);
    const done = await callbackIn(alice, callback);
    expect(done.status).toBe(200);
    expect(done.headers['content-type']).toMatch(/text\/html/);
    expect(done.headers['cache-control']).toBe('no-store');
    expect(done.text).toContain('Connected to &#34;Mock OIDC&#34;.');
    expectNoToken(done.text);
    // The code was exchanged with the PKCE verifier and the registered redirect URI.
    const exchange = tokenRequests.filter((r) => r.grant_type === 'authorization_code').at(-1)!;
    expect(exchange).toMatchObject({
      code: new URL(`http://x${callback}`).searchParams.get('code'),
      redirect_uri: 'http://localhost:8080/integrations/callback',
    });
    expect(exchange.code_verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const entry = await catalogEntry(alice, 'mock');
    // The scopes as the provider granted them (this one says `dummy`), the account from the ID token.
    expect(entry.connection).toEqual({
      status: 'connected',
      account: 'johndoe',
      scopes: ['dummy'],
      connectedAt: expect.any(Number),
      refreshedAt: null,
      expiresAt: expect.any(Number),
    });
    expectNoToken(JSON.stringify(entry));
    // Bob sees the provider, not Alice's connection.
    expect((await catalogEntry(bob, 'mock')).connection).toBeNull();

    // Stored sealed: the columns hold no token in clear.
    const row = await h.runtime.database.db
      .selectFrom('integration_connections')
      .selectAll()
      .where('owner_user_id', '=', alice.userId)
      .where('integration_id', '=', 'mock')
      .executeTakeFirstOrThrow();
    expect(row.access_token.startsWith('s1:')).toBe(true);
    expectNoToken(JSON.stringify(row));
    // Audited, without tokens.
    const { events } = await h.runtime.services.audit.list({ actorUserId: alice.userId }, { limit: 50, before: null });
    expect(events.map((e) => [e.action, e.outcome])).toEqual(
      expect.arrayContaining([
        ['integration.authorize', 'success'],
        ['integration.connect', 'success'],
      ]),
    );
    expectNoToken(JSON.stringify(events));
    expectNoToken(logs.lines.join('\n'));
  });

  test("a replayed state, an expired one, or one completed in another user's browser is refused", async () => {
    // Replayed: the first use stored the connection; the second finds nothing.
    const first = await connect(alice, 'plain');
    const callback = await approve(first.url);
    expect((await callbackIn(alice, callback)).status).toBe(200);
    const connected = await catalogEntry(alice, 'plain');
    const replay = await callbackIn(alice, callback);
    expect(replay.status).toBe(400);
    expect(replay.text).toContain('unknown or was already used');
    expect(await catalogEntry(alice, 'plain')).toEqual(connected);

    // Expired: its expiry is moved into the past (no waiting).
    const late = await connect(alice, 'plain');
    const lateCallback = await approve(late.url);
    await h.runtime.database.db
      .updateTable('integration_authorizations')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('owner_user_id', '=', alice.userId)
      .execute();
    const expired = await callbackIn(alice, lateCallback);
    expect(expired.status).toBe(400);
    expect(expired.text).toContain('expired');
    expect((await callbackIn(alice, lateCallback)).status).toBe(400); // and spent

    // Another user's browser: Bob's session cookie on Alice's callback.
    const cookie = await signedIn(bob);
    const hers = await connect(alice, 'mock');
    const hersCallback = await approve(hers.url);
    const before = tokenRequests.length;
    const wrong = await h.http().get(hersCallback).set('Cookie', cookie);
    expect(wrong.status).toBe(403);
    expect(wrong.text).toContain('another user');
    expect(tokenRequests.length).toBe(before); // no code was exchanged
    expect((await callbackIn(alice, hersCallback)).status).toBe(400); // spent
    expect((await catalogEntry(bob, 'mock')).connection).toBeNull();
    // Her own browser (her cookie) completes one.
    const again = await connect(alice, 'mock');
    expect((await callbackIn(alice, await approve(again.url))).status).toBe(200);

    const { events } = await h.runtime.services.audit.list({ action: 'integration.connect' }, { limit: 50, before: null });
    expect(events.map((e) => [e.actor_user_id, e.outcome, (e.metadata as { reason?: string }).reason])).toEqual(
      expect.arrayContaining([
        [alice.userId, 'failure', 'expired_state'],
        [bob.userId, 'denied', 'wrong_user'],
      ]),
    );
    // A state that was never issued, or none at all.
    expect(
      (
        await h
          .http()
          .get('/integrations/callback')
          .query({ state: 'x'.repeat(43), code: 'c' })
      ).status,
    ).toBe(400);
    expect((await h.http().get('/integrations/callback')).status).toBe(400);
  });

  test('an authorization URL opened in a browser that is not signed in as its starter connects nothing', async () => {
    // The attack: Bob starts connecting and sends the URL to Alice, who consents with her own account at the provider.
    const bobsConnection = () =>
      h.runtime.database.db
        .selectFrom('integration_connections')
        .select(['id', 'version'])
        .where('owner_user_id', '=', bob.userId)
        .where('integration_id', '=', 'plain')
        .executeTakeFirst();
    const stored = await bobsConnection();
    const before = tokenRequests.length;

    // Her browser has no session: refused, the code is not exchanged, and the state is spent.
    const lured = await connect(bob, 'plain');
    const callback = await approve(lured.url);
    const anonymous = await h.http().get(callback);
    expect(anonymous.status).toBe(403);
    expect(anonymous.text).toContain('sign in to the web app in this browser, then connect again');
    expect((await callbackIn(bob, callback)).status).toBe(400);

    // Her browser is signed in as herself: refused as another user's, and spent too.
    const again = await connect(bob, 'plain');
    const herBrowser = await approve(again.url);
    const wrong = await callbackIn(alice, herBrowser);
    expect(wrong.status).toBe(403);
    expect(wrong.text).toContain('another user');
    expect((await callbackIn(bob, herBrowser)).status).toBe(400);

    // A cookie that names no live session is no session.
    const forged = await connect(bob, 'plain');
    const forgedCallback = await approve(forged.url);
    expect((await h.http().get(forgedCallback).set('Cookie', 'service_session=s%3Anot-a-session.x')).status).toBe(403);

    expect(tokenRequests.length).toBe(before);
    expect(await bobsConnection()).toEqual(stored);
    const { events } = await h.runtime.services.audit.list(
      { action: 'integration.connect', actorUserId: bob.userId },
      { limit: 50, before: null },
    );
    expect(events.filter((e) => e.outcome === 'denied').map((e) => (e.metadata as { reason?: string }).reason)).toEqual(
      expect.arrayContaining(['sign_in_required']),
    );
  });

  test('an MCP server signs in with the connection; an expiring token is refreshed on use', async () => {
    const created = await h.http().post('/api/v1/mcp-servers').set(bob.auth).send({
      name: 'Docs',
      url: mcp.streamableUrl,
      transport: 'streamable_http',
      authentication: 'oauth',
      integrationId: 'mock',
      defaultToolPolicy: 'allow',
    });
    expect(created.status).toBe(200);
    // Not connected yet: the catalog cannot be read, and the error names the route to connect.
    expect(created.body.server).toMatchObject({ authentication: 'oauth', integrationId: 'mock', hasCredentials: false, status: 'error' });
    expect(created.body.server.lastError).toContain('POST /api/v1/integrations/connect {"integrationId":"mock"}');

    // Tokens that expire within the minute: the first use refreshes them.
    provider.expiresIn = 30;
    const { url } = await connect(bob, 'mock');
    const first = grants.length;
    expect((await callbackIn(bob, await approve(url))).status).toBe(200);
    // The code was exchanged, then the connection made the server read its catalog (after the answer): with a refreshed token.
    const serverId = created.body.server.serverId as string;
    const serverOf = async () => (await h.http().get('/api/v1/mcp-servers').query({ serverId }).set(bob.auth)).body.server;
    await waitFor(async () => (await serverOf()).status === 'active');
    const [exchanged, refreshed] = grants.slice(first);
    expect(exchanged).toMatchObject({ grant: 'authorization_code' });
    expect(refreshed).toMatchObject({ grant: 'refresh_token' });
    expect(tokenRequests.filter((r) => r.grant_type === 'refresh_token').at(-1)!.refresh_token).toBe(exchanged!.refresh);
    const server = await h.http().get('/api/v1/mcp-servers').query({ serverId }).set(bob.auth);
    expect(server.body.server.status).toBe('active');
    expect(mcp.requests.at(-1)?.headers.authorization).toBe(`Bearer ${refreshed!.access}`);
    expect((await catalogEntry(bob, 'mock')).connection).toMatchObject({ status: 'connected', refreshedAt: expect.any(Number) });

    // A tool call uses (and, as it still expires within the minute, refreshes again) the token.
    const call = await h.runtime.services.mcpTools.callTool(
      bob.userId,
      'docs__echo',
      { text: 'hi' },
      { signal: new AbortController().signal, maxResultBytes: 1000 },
    );
    expect(call).toEqual({ output: 'echo: hi', isError: false });
    expect(grants.at(-1)).toMatchObject({ grant: 'refresh_token' });
    expect(mcp.requests.at(-1)?.headers.authorization).toBe(`Bearer ${grants.at(-1)!.access}`);

    // The provider refuses the next refresh: the call says to connect again, the connection is expired.
    provider.refuseRefresh = true;
    const refused = await h.runtime.services.mcpTools.callTool(
      bob.userId,
      'docs__echo',
      { text: 'again' },
      { signal: new AbortController().signal, maxResultBytes: 1000 },
    );
    expect(refused.isError).toBe(true);
    expect(refused.output).toContain('has expired: connect it with POST /api/v1/integrations/connect {"integrationId":"mock"}');
    expect((await catalogEntry(bob, 'mock')).connection.status).toBe('expired');
    const { events } = await h.runtime.services.audit.list(
      { action: 'integration.refresh', actorUserId: bob.userId },
      { limit: 50, before: null },
    );
    expect(events.map((e) => e.outcome)).toEqual(expect.arrayContaining(['success', 'failure']));
    const counted = Object.fromEntries((await h.runtime.metrics.integrationRefreshes.get()).values.map((v) => [v.labels.outcome, v.value]));
    expect(counted).toEqual({ success: 2, refused: 1 });
    provider.refuseRefresh = false;
    provider.expiresIn = 3600;
    expect(logs.lines.some((line) => line.includes('an integration token could not be refreshed'))).toBe(true);
    expectNoToken(JSON.stringify(events));
    expectNoToken(logs.lines.join('\n'));
    expectNoToken(JSON.stringify(server.body));
  });

  test("disconnect revokes the tokens and deletes the connection; another user's is 404", async () => {
    const { url } = await connect(alice, 'plain');
    expect((await callbackIn(alice, await approve(url))).status).toBe(200);
    const refreshToken = issued.at(-1) as string;
    expect((await h.http().delete('/api/v1/integrations/connection').query({ integrationId: 'plain' }).set(bob.auth)).status).toBe(404);
    const before = revocations.length;
    const res = await h.http().delete('/api/v1/integrations/connection').set(alice.auth).send({ integrationId: 'plain' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ integrationId: 'plain', disconnected: true, revoked: true });
    await waitFor(() => revocations.length > before);
    expect(Object.fromEntries(revocations.at(-1)!)).toMatchObject({
      token: refreshToken,
      token_type_hint: 'refresh_token',
      client_id: 'plain-client',
    });
    expect((await catalogEntry(alice, 'plain')).connection).toBeNull();
    expect((await h.http().delete('/api/v1/integrations/connection').query({ integrationId: 'plain' }).set(alice.auth)).status).toBe(404);
    expect((await h.http().delete('/api/v1/integrations/connection').set(alice.auth)).status).toBe(400);
    const { events } = await h.runtime.services.audit.list({ action: 'integration.disconnect' }, { limit: 5, before: null });
    expect(events[0]).toMatchObject({ actor_user_id: alice.userId, resource_id: 'plain', outcome: 'success' });
    expect(events[0]!.metadata).toEqual({ revoked: true });
  });

  test('concurrent uses of an expiring token refresh it once (a rotating refresh token) and both get the new token', async () => {
    const carol = await h.newUser('carol');
    provider.expiresIn = 30; // within the minute before expiry: refreshed when used
    const { url } = await connect(carol, 'mock');
    expect((await callbackIn(carol, await approve(url))).status).toBe(200);
    provider.expiresIn = 3600;
    provider.rotate = true;
    try {
      const refreshGrants = () => tokenRequests.filter((r) => r.grant_type === 'refresh_token').length;
      const before = refreshGrants();
      const tokens = await Promise.all(
        [1, 2].map(() => h.runtime.services.integrationConnections.accessToken(carol.userId, 'mock', 'Mock OIDC')),
      );
      // One refresh reached the provider; without serializing, the second would spend the rotated token and be refused.
      expect(refreshGrants()).toBe(before + 1);
      expect(grants.at(-1)!.grant).toBe('refresh_token');
      expect(tokens).toEqual([grants.at(-1)!.access, grants.at(-1)!.access]);
      expect((await catalogEntry(carol, 'mock')).connection).toMatchObject({ status: 'connected', refreshedAt: expect.any(Number) });
      const row = await h.runtime.database.db
        .selectFrom('integration_connections')
        .select(['refreshing_until', 'version'])
        .where('owner_user_id', '=', carol.userId)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ refreshing_until: null, version: 2 });
      // The new token is fresh: used as it is.
      expect(await h.runtime.services.integrationConnections.accessToken(carol.userId, 'mock', 'Mock OIDC')).toBe(tokens[0]);
      expect(refreshGrants()).toBe(before + 1);

      // A claim whose holder never finishes (it stopped, say) lapses: the request waiting for it then refreshes itself.
      await h.runtime.database.db
        .updateTable('integration_connections')
        .set({ expires_at: new Date(Date.now() + 30_000), refreshing_until: new Date(Date.now() + 300) })
        .where('owner_user_id', '=', carol.userId)
        .execute();
      const afterLapse = await h.runtime.services.integrationConnections.accessToken(carol.userId, 'mock', 'Mock OIDC');
      expect(refreshGrants()).toBe(before + 2);
      expect(afterLapse).toBe(grants.at(-1)!.access);
      expect((await catalogEntry(carol, 'mock')).connection.status).toBe('connected');
    } finally {
      provider.rotate = false;
    }
  });

  test('bad input is 400, unknown integrations 404, and the capability switches the area off', async () => {
    for (const body of [
      {},
      { integrationId: 'Bad Id' },
      { integrationId: 'mock', extra: 1 },
      { integrationId: 'mock', userId: bob.userId },
    ]) {
      const res = await h.http().post('/api/v1/integrations/connect').set(alice.auth).send(body);
      expect({ body, status: res.status }).toEqual({ body, status: 'userId' in body ? 403 : 400 });
    }
    expect((await h.http().post('/api/v1/integrations/connect').set(alice.auth).send({ integrationId: 'nosuch' })).status).toBe(404);
    expect(
      (
        await h
          .http()
          .post('/api/v1/integrations/connect')
          .set(alice.auth)
          .send({ integrationId: 'mcp:01936d2e-7b1a-7c3e-9f00-5a2b9c4d1ea0' })
      ).status,
    ).toBe(404);
    // An MCP server's integration id may come unencoded in a query (a colon is allowed there).
    expect((await h.http().get('/api/v1/integrations?integrationId=mcp:01936d2e-7b1a-7c3e-9f00-5a2b9c4d1ea0').set(alice.auth)).status).toBe(
      404,
    );
    expect(
      (await h.http().delete('/api/v1/integrations/connection?integrationId=mcp:01936d2e-7b1a-7c3e-9f00-5a2b9c4d1ea0').set(alice.auth))
        .status,
    ).toBe(404);

    // An authorization server that cannot be used: 502 with why, audited, nothing stored.
    const down = await h.http().post('/api/v1/integrations/connect').set(alice.auth).send({ integrationId: 'down' });
    expect(down.status).toBe(502);
    expect(down.body).toEqual({ code: 'integration_error', error: 'The provider could not be reached for the discovery.' });
    const noServer = await h
      .http()
      .post('/api/v1/mcp-servers')
      .set(alice.auth)
      .send({ name: 'No AS', url: mcp.streamableUrl, transport: 'streamable_http', authentication: 'oauth' });
    const integrationId = `mcp:${noServer.body.server.serverId as string}`;
    const announcesNone = await h.http().post('/api/v1/integrations/connect').set(alice.auth).send({ integrationId });
    expect(announcesNone.status).toBe(502);
    expect(announcesNone.body.code).toBe('integration_error');
    expect(announcesNone.body.error).toBe(
      'The MCP server announces no OAuth authorization server (no protected-resource or authorization server metadata was found).',
    );
    expect(JSON.stringify(announcesNone.body)).not.toContain('127.0.0.1');
    const failures = await h.runtime.services.audit.list(
      { action: 'integration.authorize', actorUserId: alice.userId },
      { limit: 50, before: null },
    );
    expect(failures.events.filter((e) => e.outcome === 'failure').map((e) => e.resource_id)).toEqual(
      expect.arrayContaining(['down', integrationId]),
    );
    expect(
      await h.runtime.database.db
        .selectFrom('integration_authorizations')
        .select('state_hash')
        .where('integration_id', 'in', ['down', integrationId])
        .execute(),
    ).toEqual([]);

    const pending = await connect(alice, 'mock');
    const callback = await approve(pending.url);
    await h.runtime.services.capabilities.update({ userId: 'test-admin', requestId: null }, { integrations: false });
    try {
      for (const res of [
        await h.http().get('/api/v1/integrations').set(alice.auth),
        await h.http().post('/api/v1/integrations/connect').set(alice.auth).send({ integrationId: 'mock' }),
        await h.http().delete('/api/v1/integrations/connection').query({ integrationId: 'mock' }).set(alice.auth),
      ]) {
        expect(res.status).toBe(403);
        expect(res.body).toMatchObject({ code: 'capability_disabled', capability: 'integrations' });
      }
      const off = await callbackIn(alice, callback);
      expect(off.status).toBe(403);
      expect(off.text).toContain('disabled');
    } finally {
      await h.runtime.services.capabilities.update({ userId: 'test-admin', requestId: null }, { integrations: true });
    }
  });
});

/** Waits until `condition` holds (checked every 10 ms, for at most a minute). */
async function waitFor(condition: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met within a minute');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
