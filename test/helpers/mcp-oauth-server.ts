import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Response } from 'express';
import express from 'express';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import { InvalidGrantError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import { getOAuthProtectedResourceMetadataUrl, mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { OAuthClientInformationFull, OAuthTokenRevocationRequest, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/**
 * An MCP server on loopback that requires OAuth, per the MCP authorization spec, built from the
 * SDK's own server auth: its authorization server (`mcpAuthRouter`: RFC 8414 metadata, RFC 9728
 * protected-resource metadata, dynamic client registration, an authorization endpoint, a token
 * endpoint checking PKCE, revocation) and a Streamable HTTP endpoint at `/mcp` behind
 * `requireBearerAuth` (401 with `WWW-Authenticate: Bearer resource_metadata=…`). The consent
 * step approves at once, as the user who opened the URL would; tokens live in memory.
 */
export interface TestOAuthMcpServer {
  /** The MCP endpoint. */
  mcpUrl: string;
  /** Lifetime of the access tokens issued from now on (seconds). */
  expiresIn: number;
  /** While true, refresh grants are refused (`invalid_grant`). */
  refuseRefresh: boolean;
  /** Clients registered dynamically. */
  clients: OAuthClientInformationFull[];
  /** Every access token issued, in order (the last is current). */
  issued: string[];
  /** Every refresh token issued. */
  refreshTokens: string[];
  /** Refresh grants answered. */
  refreshes: number;
  /** Tokens revoked. */
  revoked: string[];
  /** The `resource` of each authorization request. */
  resources: Array<string | undefined>;
  /** The calls of its `echo` tool, with the token they carried. */
  calls: Array<{ text: string; token: string }>;
  /** Forgets every access token issued so far (as a revocation at the provider would): they are answered 401. */
  dropAccessTokens(): void;
  /** Holds every request to the MCP endpoint from now on until the function returned is called. */
  hold(): () => void;
  close(): Promise<void>;
}

export async function startOAuthMcpServer(): Promise<TestOAuthMcpServer> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const mcpUrl = `${base}/mcp`;

  const codes = new Map<string, { clientId: string; challenge: string; resource?: URL }>();
  const access = new Map<string, AuthInfo>();
  const refresh = new Map<string, { clientId: string; resource?: URL }>();
  const registered = new Map<string, OAuthClientInformationFull>();

  /** While set, requests to the MCP endpoint wait for it. */
  let gate: Promise<void> | null = null;

  const state: Omit<TestOAuthMcpServer, 'mcpUrl' | 'close' | 'dropAccessTokens' | 'hold'> = {
    expiresIn: 3600,
    refuseRefresh: false,
    clients: [],
    issued: [],
    refreshTokens: [],
    refreshes: 0,
    revoked: [],
    resources: [],
    calls: [],
  };

  const issue = (clientId: string, resource: URL | undefined): OAuthTokens => {
    const token = `mcp-at-${randomUUID()}`;
    const refreshToken = `mcp-rt-${randomUUID()}`;
    access.set(token, {
      token,
      clientId,
      scopes: ['tools'],
      expiresAt: Math.floor(Date.now() / 1000) + state.expiresIn,
      ...(resource ? { resource } : {}),
    });
    refresh.set(refreshToken, { clientId, ...(resource ? { resource } : {}) });
    state.issued.push(token);
    state.refreshTokens.push(refreshToken);
    return { access_token: token, token_type: 'Bearer', expires_in: state.expiresIn, refresh_token: refreshToken, scope: 'tools' };
  };

  const clientsStore: OAuthRegisteredClientsStore = {
    getClient: (clientId) => registered.get(clientId),
    registerClient: (client) => {
      const full = { ...client, client_id: randomUUID(), client_id_issued_at: Math.floor(Date.now() / 1000) } as OAuthClientInformationFull;
      registered.set(full.client_id, full);
      state.clients.push(full);
      return full;
    },
  };

  const provider: OAuthServerProvider = {
    clientsStore,
    async authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response) {
      const code = randomUUID();
      codes.set(code, {
        clientId: client.client_id,
        challenge: params.codeChallenge,
        ...(params.resource ? { resource: params.resource } : {}),
      });
      state.resources.push(params.resource?.href);
      const target = new URL(params.redirectUri);
      target.searchParams.set('code', code);
      if (params.state !== undefined) target.searchParams.set('state', params.state);
      res.redirect(302, target.href);
    },
    async challengeForAuthorizationCode(_client, code) {
      const found = codes.get(code);
      if (!found) throw new InvalidGrantError('unknown authorization code');
      return found.challenge;
    },
    async exchangeAuthorizationCode(client, code) {
      const found = codes.get(code);
      if (!found || found.clientId !== client.client_id) throw new InvalidGrantError('unknown authorization code');
      codes.delete(code);
      return issue(client.client_id, found.resource);
    },
    async exchangeRefreshToken(client, refreshToken) {
      const found = refresh.get(refreshToken);
      if (state.refuseRefresh || !found || found.clientId !== client.client_id)
        throw new InvalidGrantError('the refresh token is not valid');
      refresh.delete(refreshToken); // rotated
      state.refreshes += 1;
      return issue(client.client_id, found.resource);
    },
    async verifyAccessToken(token) {
      const found = access.get(token);
      if (!found) throw new InvalidTokenError('unknown token');
      return found;
    },
    async revokeToken(_client, request: OAuthTokenRevocationRequest) {
      state.revoked.push(request.token);
      access.delete(request.token);
      refresh.delete(request.token);
    },
  };

  const app = express();
  const noLimit = { rateLimit: false as const };
  app.use(
    mcpAuthRouter({
      provider,
      issuerUrl: new URL(base),
      resourceServerUrl: new URL(mcpUrl),
      scopesSupported: ['tools'],
      authorizationOptions: noLimit,
      clientRegistrationOptions: noLimit,
      revocationOptions: noLimit,
      tokenOptions: noLimit,
    }),
  );
  const bearer = requireBearerAuth({ verifier: provider, resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(new URL(mcpUrl)) });
  const held: express.RequestHandler = (_req, _res, next) => {
    if (gate === null) next();
    else void gate.then(() => next());
  };
  app.post('/mcp', held, bearer, express.json(), async (req, res) => {
    const token = req.auth?.token ?? '';
    const mcp = new McpServer({ name: 'oauth-test-mcp-server', version: '1.0.0' }, { capabilities: { tools: {} } });
    mcp.server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [
        {
          name: 'echo',
          description: 'Repeats the text it is given.',
          inputSchema: { type: 'object' as const, properties: { text: { type: 'string' } }, required: ['text'] },
        },
      ],
    }));
    mcp.server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const text = String((request.params.arguments ?? {}).text);
      state.calls.push({ text, token });
      return { content: [{ type: 'text' as const, text: `echo: ${text}` }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  server.on('request', app);

  return Object.assign(state, {
    mcpUrl,
    dropAccessTokens: () => access.clear(),
    hold: () => {
      let release: () => void = () => undefined;
      gate = new Promise<void>((resolve) => {
        release = () => resolve();
      });
      return () => {
        gate = null;
        release();
      };
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
