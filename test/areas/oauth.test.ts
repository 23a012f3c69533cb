import { auth, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { sessionCookie, startHarness, useHarnessWith } from '../helpers/harness';

// The issuer is the service's public URL; the clients reach it through the harness, as through a proxy.
const PUBLIC = 'https://workspace.example';
const ctx = useHarnessWith(() => ({ PUBLIC_URL: PUBLIC }), 'alice', 'bob');
const fetchFn = (url: string | URL, init?: RequestInit) => fetch(String(url).replace(PUBLIC, ctx.h.baseUrl), init);
const REDIRECT = 'http://127.0.0.1:33418/callback';

/** A desktop MCP client's side of the sign-in: what it registers, remembers and opens in the browser. */
class DesktopClient implements OAuthClientProvider {
  info?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = '';
  opened?: URL;
  constructor(private readonly metadata: Partial<OAuthClientMetadata> = {}) {}
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Desktop editor',
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      ...this.metadata,
    };
  }
  state() {
    return 'state-123';
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.opened = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** A browser signed in to the workspace as `user` (its session cookie sent with every request). */
async function signedInBrowser(user: { Authorization: string }) {
  const started = await ctx.h.http().post('/auth/session').set(user).expect(200);
  return ctx.h.http().set('Cookie', sessionCookie(started.headers['set-cookie']));
}

/** The browser: signed in to the workspace, it follows the authorization URL to the consent page and answers it. */
async function consent(url: URL, cookieOf: { Authorization: string }, decision: 'approve' | 'deny') {
  const { h } = ctx;
  const browser = await signedInBrowser(cookieOf);
  const authorize = await browser.get(`${url.pathname}${url.search}`);
  expect(authorize.status).toBe(302);
  const consentUrl = new URL(authorize.headers.location as string, h.baseUrl);
  expect(consentUrl.pathname).toBe('/oauth/consent');
  const form = await browser.get(`${consentUrl.pathname}${consentUrl.search}`);
  expect(form.status).toBe(200);
  expect(form.text).toContain('Desktop editor');
  const requestId = consentUrl.searchParams.get('request') as string;
  const decided = await browser.post('/oauth/consent').set('Origin', h.baseUrl).type('form').send({ request: requestId, decision });
  expect(decided.status).toBe(303);
  return { back: new URL(decided.headers.location as string), requestId, browser };
}

describe('OAuth 2.1 sign-in of an MCP client', () => {
  test('a client that registers itself signs in through the browser session and gets a working token bound to /mcp', async () => {
    const { h, alice } = ctx;
    const client = new DesktopClient();
    const serverUrl = `${PUBLIC}/mcp`;
    expect(await auth(client, { serverUrl, fetchFn })).toBe('REDIRECT');
    expect(client.info?.client_id).toEqual(expect.any(String));
    expect(client.opened?.searchParams.get('code_challenge_method')).toBe('S256');

    const { back } = await consent(client.opened as URL, alice.auth, 'approve');
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
    expect(back.searchParams.get('state')).toBe('state-123');
    const code = back.searchParams.get('code') as string;
    expect(await auth(client, { serverUrl, authorizationCode: code, fetchFn })).toBe('AUTHORIZED');
    const tokens = client.saved as OAuthTokens;
    expect(tokens.access_token).toMatch(/^aiws_oat_/);
    expect(tokens.scope).toBe('read write chat');

    // Listed among alice's tokens under the client's name, bound to the MCP resource only.
    const listed = await h.http().get('/api/v1/access-tokens').set(alice.auth).expect(200);
    const issued = listed.body.accessTokens.find((t: { clientId?: string }) => t.clientId === client.info?.client_id);
    expect(issued).toMatchObject({ name: 'Desktop editor', scopes: ['read', 'write', 'chat'], status: 'active' });
    // The token works at /mcp, through the MCP SDK's client.
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const mcp = new Client({ name: 'desktop-editor', version: '1.0.0' });
    const headers = { Authorization: `Bearer ${tokens.access_token}` };
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${h.baseUrl}/mcp`), { requestInit: { headers } }));
    try {
      expect((await mcp.listTools()).tools.map((t) => t.name)).toContain('notes_search');
    } finally {
      await mcp.close();
    }
    const elsewhere = await h.http().get('/api/v1/notes').set('Authorization', `Bearer ${tokens.access_token}`);
    expect(elsewhere.status).toBe(401);
    expect(elsewhere.body.error).toContain('/mcp only');

    // The code works once.
    await expect(auth(client, { serverUrl, authorizationCode: code, fetchFn })).rejects.toThrow();

    // A refresh gives a new pair; the old refresh token no longer works.
    const refreshed = await h
      .http()
      .post('/token')
      .type('form')
      .send({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: client.info?.client_id });
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.access_token).not.toBe(tokens.access_token);
    const reused = await h
      .http()
      .post('/token')
      .type('form')
      .send({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: client.info?.client_id });
    expect(reused.status).toBe(400);
    expect(reused.body.error).toBe('invalid_grant');

    // The refresh renewed the connection's token: one entry in the list, the old secret refused.
    const after = await h.http().get('/api/v1/access-tokens').set(alice.auth).expect(200);
    expect(after.body.accessTokens.filter((t: { clientId?: string }) => t.clientId === client.info?.client_id)).toHaveLength(1);
    const old = await h.http().get('/api/v1/notes').set('Authorization', `Bearer ${tokens.access_token}`);
    expect(old.body.error).toBe('The access token is not valid.');

    // Revoking it in the list disconnects the client: the next refresh is refused.
    const revoked = await h.http().delete('/api/v1/access-tokens').query({ tokenId: issued.tokenId }).set(alice.auth);
    expect(revoked.status).toBe(200);
    const afterRevoke = await h
      .http()
      .post('/token')
      .type('form')
      .send({ grant_type: 'refresh_token', refresh_token: refreshed.body.refresh_token, client_id: client.info?.client_id });
    expect(afterRevoke.status).toBe(400);
    expect(afterRevoke.body.error).toBe('invalid_grant');
  });

  test('the metadata documents say where to sign in; a 401 from /mcp points at them', async () => {
    const { h } = ctx;
    const resource = await h.http().get('/.well-known/oauth-protected-resource/mcp').expect(200);
    expect(resource.body).toMatchObject({
      resource: `${PUBLIC}/mcp`,
      authorization_servers: [`${PUBLIC}/`],
      scopes_supported: ['read', 'write', 'chat'],
    });
    const server = await h.http().get('/.well-known/oauth-authorization-server').expect(200);
    expect(server.body).toMatchObject({ code_challenge_methods_supported: ['S256'], registration_endpoint: `${PUBLIC}/register` });
    const challenge = await h.http().post('/mcp').send({});
    expect(challenge.status).toBe(401);
    expect(challenge.headers['www-authenticate']).toContain(`resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/mcp"`);
  });

  test('a denied request sends the client back with access_denied and no code', async () => {
    const { h, bob } = ctx;
    const client = new DesktopClient();
    expect(await auth(client, { serverUrl: `${PUBLIC}/mcp`, fetchFn })).toBe('REDIRECT');
    const { back, requestId, browser } = await consent(client.opened as URL, bob.auth, 'deny');
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('code')).toBeNull();
    // Decided once: a second answer finds nothing to decide.
    const again = await browser
      .post('/oauth/consent')
      .set('Origin', h.baseUrl)
      .type('form')
      .send({ request: requestId, decision: 'approve' });
    expect(again.status).toBe(404);
  });

  test('bad requests change nothing: confidential clients, unknown scopes, no session, another origin, a forged code', async () => {
    const { h, alice } = ctx;
    const confidential = await h
      .http()
      .post('/register')
      .send({ client_name: 'x', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_post' });
    expect(confidential.status).toBe(400);
    expect(confidential.body.error).toBe('invalid_client_metadata');

    const client = new DesktopClient();
    expect(await auth(client, { serverUrl: `${PUBLIC}/mcp`, scope: 'read admin', fetchFn })).toBe('REDIRECT');
    const refused = await h.http().get(`${client.opened!.pathname}${client.opened!.search}`);
    expect(refused.status).toBe(302);
    expect(new URL(refused.headers.location as string).searchParams.get('error')).toBe('invalid_scope');

    expect(await auth(client, { serverUrl: `${PUBLIC}/mcp`, fetchFn })).toBe('REDIRECT');
    const authorize = await h.http().get(`${client.opened!.pathname}${client.opened!.search}`).expect(302);
    const consentUrl = new URL(authorize.headers.location as string, h.baseUrl);
    const requestId = consentUrl.searchParams.get('request') as string;
    // No session: the page asks to sign in, and a post decides nothing.
    expect((await h.http().get(`${consentUrl.pathname}${consentUrl.search}`)).status).toBe(401);
    expect(
      (await h.http().post('/oauth/consent').set('Origin', h.baseUrl).type('form').send({ request: requestId, decision: 'approve' }))
        .status,
    ).toBe(401);
    // A signed-in browser posting from another site: refused.
    const browser = await signedInBrowser(alice.auth);
    expect(
      (
        await browser
          .post('/oauth/consent')
          .set('Origin', 'https://evil.example')
          .type('form')
          .send({ request: requestId, decision: 'approve' })
      ).status,
    ).toBe(403);
    expect(
      (await browser.post('/oauth/consent').set('Origin', h.baseUrl).type('form').send({ request: requestId, decision: 'maybe' })).status,
    ).toBe(400);
    expect((await browser.get('/oauth/consent').query({ request: 'unknown' })).status).toBe(404);
    // The request is still pending and decides normally.
    const decided = await browser
      .post('/oauth/consent')
      .set('Origin', h.baseUrl)
      .type('form')
      .send({ request: requestId, decision: 'approve' });
    expect(decided.status).toBe(303);

    const forged = await h
      .http()
      .post('/token')
      .type('form')
      .send({
        grant_type: 'authorization_code',
        code: 'forged',
        code_verifier: 'x'.repeat(43),
        client_id: client.info?.client_id,
        redirect_uri: REDIRECT,
      });
    expect(forged.status).toBe(400);
    expect(forged.body.error).toBe('invalid_grant');
  });

  test('an http PUBLIC_URL off loopback is no OAuth issuer: the service starts without the authorization server', async () => {
    const plain = await startHarness({ PUBLIC_URL: 'http://workspace.internal:8080' });
    try {
      expect((await plain.http().get('/.well-known/oauth-authorization-server')).status).toBe(404);
      const challenge = await plain.http().post('/mcp').send({});
      expect(challenge.headers['www-authenticate'] ?? '').not.toContain('resource_metadata');
    } finally {
      await plain.close();
    }
  });

  test('every token is bound to /mcp: a client that names no resource or another one gets no wider token', async () => {
    const { h, alice } = ctx;
    const client = new DesktopClient();
    expect(await auth(client, { serverUrl: `${PUBLIC}/mcp`, fetchFn })).toBe('REDIRECT');
    const opened = client.opened as URL;
    // Another resource at /authorize: refused back to the client.
    const elsewhere = new URL(opened.href);
    elsewhere.searchParams.set('resource', 'https://evil.example/api/v1/notes');
    const refused = await h.http().get(`${elsewhere.pathname}${elsewhere.search}`).expect(302);
    expect(new URL(refused.headers.location as string).searchParams.get('error')).toBe('invalid_target');
    // No resource at all: the token is still /mcp's.
    opened.searchParams.delete('resource');
    const { back } = await consent(opened, alice.auth, 'approve');
    const exchange = (resource?: string) =>
      h
        .http()
        .post('/token')
        .type('form')
        .send({
          grant_type: 'authorization_code',
          code: back.searchParams.get('code'),
          code_verifier: client.verifier,
          client_id: client.info?.client_id,
          redirect_uri: REDIRECT,
          ...(resource ? { resource } : {}),
        });
    const wider = await exchange('https://evil.example/api/v1/notes');
    expect(wider.status).toBe(400);
    expect(wider.body.error).toBe('invalid_target');
    const issued = await exchange();
    expect(issued.status).toBe(200);
    const notes = await h
      .http()
      .get('/api/v1/notes')
      .set('Authorization', `Bearer ${issued.body.access_token as string}`);
    expect(notes.status).toBe(401);
    // A used refresh token that comes back ends the connection.
    const refresh = (token: string) =>
      h.http().post('/token').type('form').send({ grant_type: 'refresh_token', refresh_token: token, client_id: client.info?.client_id });
    const renewed = await refresh(issued.body.refresh_token).expect(200);
    expect((await refresh(issued.body.refresh_token)).body.error).toBe('invalid_grant');
    expect((await refresh(renewed.body.refresh_token)).body.error).toBe('invalid_grant');
  });

  test('the consent page lets its form post carry its origin', async () => {
    const { alice } = ctx;
    const client = new DesktopClient({ redirect_uris: ['cursor://oauth/callback'] });
    Object.defineProperty(client, 'redirectUrl', { get: () => 'cursor://oauth/callback' });
    expect(await auth(client, { serverUrl: `${PUBLIC}/mcp`, fetchFn })).toBe('REDIRECT');
    const browser = await signedInBrowser(alice.auth);
    const authorize = await browser.get(`${client.opened!.pathname}${client.opened!.search}`).expect(302);
    const page = await browser.get(authorize.headers.location as string).expect(200);
    expect(page.headers['referrer-policy']).toBe('same-origin');
    // An app's own scheme is a form-action source the redirect may go to.
    expect(page.headers['content-security-policy']).toContain("form-action 'self' cursor:");
  });

  test('unfinished sign-ins do not pile up: old unused clients and ended requests are cleared as new ones come', async () => {
    const { h } = ctx;
    const db = h.runtime.database.db;
    const old = new Date(Date.now() - 2 * 86_400_000);
    await db
      .insertInto('oauth_clients')
      .values({ id: 'stale-client', metadata: JSON.stringify({ client_id: 'stale-client', redirect_uris: [REDIRECT] }), created_at: old })
      .execute();
    await db
      .insertInto('oauth_clients')
      .values({
        id: 'stale-with-request',
        metadata: JSON.stringify({ client_id: 'stale-with-request', redirect_uris: [REDIRECT] }),
        created_at: old,
      })
      .execute();
    await db
      .insertInto('oauth_authorizations')
      .values({
        id: 'stale-request',
        client_id: 'stale-with-request',
        params: JSON.stringify({}),
        status: 'pending',
        created_at: old,
        expires_at: old,
      })
      .execute();
    const client = new DesktopClient();
    expect(await auth(client, { serverUrl: `${PUBLIC}/mcp`, fetchFn })).toBe('REDIRECT');
    await h.http().get(`${client.opened!.pathname}${client.opened!.search}`).expect(302);
    const ids = (await db.selectFrom('oauth_clients').select('id').execute()).map((row) => row.id);
    expect(ids).not.toContain('stale-client');
    expect(await db.selectFrom('oauth_authorizations').select('id').where('id', '=', 'stale-request').execute()).toEqual([]);
    // The next registration clears the client whose request went.
    expect(await auth(new DesktopClient(), { serverUrl: `${PUBLIC}/mcp`, fetchFn })).toBe('REDIRECT');
    expect((await db.selectFrom('oauth_clients').select('id').execute()).map((row) => row.id)).not.toContain('stale-with-request');
  });
});
