import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js' with {
  'resolution-mode': 'import',
};
import * as oidc from 'openid-client';
import { errorDetail } from '../../platform/ai/models';
import {
  AddressNotAllowed,
  HostNotResolved,
  type Outbound,
  OutboundTimeout,
  RedirectRefused,
  ResponseTooLarge,
  UrlNotAllowed,
} from '../../platform/net/outbound';
import { type DiscoveredServer, expiresAtOf, OAuthFailure, scrubbed, type TokenSet } from './oauth';

/**
 * MCP servers that announce their own authorization server, through the MCP SDK's client auth
 * (the MCP authorization spec: protected-resource metadata, authorization server discovery,
 * dynamic client registration, PKCE and the resource indicator). Every request goes through the
 * outbound guard.
 */

/** What the service calls itself when it registers with an authorization server. */
export const CLIENT_NAME = 'AI Workspace Service';
/** The most bytes an answer of an MCP server's authorization server may have. */
const MAX_ANSWER_BYTES = 256 * 1024;

/** The MCP SDK's client auth functions, loaded once (the SDK is an ES module). */
const sdkAuth = () => import('@modelcontextprotocol/sdk/client/auth.js');

/** Why an MCP SDK auth call failed, as an OAuthFailure. */
function serverFailure(step: string, error: unknown, secrets: Array<string | null | undefined>): OAuthFailure {
  if (error instanceof OAuthFailure) return error;
  const detail = scrubbed(errorDetail(error), secrets);
  const errorCode = (error as { errorCode?: unknown }).errorCode;
  if (typeof errorCode === 'string' && errorCode !== 'server_error' && errorCode !== 'temporarily_unavailable') {
    return new OAuthFailure(
      'refused',
      `The MCP server's authorization server refused the ${step} (${scrubbed(errorCode, secrets)}).`,
      detail,
    );
  }
  const chain = [error, (error as { cause?: unknown }).cause];
  if (chain.some((e) => e instanceof OutboundTimeout))
    return new OAuthFailure('unavailable', `The MCP server's authorization server did not answer the ${step} in time.`, detail);
  if (chain.some((e) => e instanceof AddressNotAllowed || e instanceof UrlNotAllowed)) {
    return new OAuthFailure('refused', `The MCP server's authorization server is at an address that is not allowed (${step}).`, detail);
  }
  if (chain.some((e) => e instanceof RedirectRefused))
    return new OAuthFailure(
      'unavailable',
      `The MCP server's authorization server answered the ${step} with a redirect, which is not followed.`,
      detail,
    );
  if (chain.some((e) => e instanceof ResponseTooLarge))
    return new OAuthFailure('unavailable', `The MCP server's authorization server answered the ${step} with too much data.`, detail);
  if (chain.some((e) => e instanceof HostNotResolved))
    return new OAuthFailure('unavailable', `The MCP server's authorization server's host name does not resolve (${step}).`, detail);
  return new OAuthFailure('unavailable', `The MCP server's authorization server could not be used for the ${step}.`, detail);
}

/** The client metadata the service registers with an MCP server's authorization server. */
function clientMetadata(redirectUri: string, scope: string | null): OAuthClientMetadata {
  return {
    client_name: CLIENT_NAME,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    // A public client: PKCE protects the code; there is no secret to keep or rotate.
    token_endpoint_auth_method: 'none',
    ...(scope ? { scope } : {}),
  };
}

/**
 * MCP servers that announce their own authorization server (the MCP authorization spec), through
 * the SDK's client auth, every request through the outbound guard.
 */
export class McpServerFlow {
  constructor(
    private readonly outbound: Outbound,
    private readonly timeoutMs: number,
  ) {}

  private fetcher(): typeof fetch {
    return this.outbound.fetcher({ timeoutMs: this.timeoutMs, maxBytes: MAX_ANSWER_BYTES });
  }

  /**
   * Discovers the server's authorization server (RFC 9728 protected-resource metadata, then RFC
   * 8414 / OpenID Connect metadata), registers a client dynamically (RFC 7591) unless `client`
   * is one registered there before, and builds the authorization URL (PKCE, state, resource).
   */
  async start(
    serverUrl: string,
    redirectUri: string,
    state: string,
    known: { discovered: DiscoveredServer; client: OAuthClientInformationMixed } | null,
  ): Promise<{ authorizationUrl: string; codeVerifier: string; discovered: DiscoveredServer; client: OAuthClientInformationMixed }> {
    const auth = await sdkAuth();
    const fetchFn = this.fetcher();
    let discovered: DiscoveredServer;
    try {
      const info = await auth.discoverOAuthServerInfo(serverUrl, { fetchFn });
      if (!info.authorizationServerMetadata) {
        throw new OAuthFailure(
          'refused',
          'The MCP server announces no OAuth authorization server (no protected-resource or authorization server metadata was found).',
          'no metadata',
        );
      }
      const resourceMetadata = info.resourceMetadata ?? null;
      // The resource indicator: the metadata's `resource` (checked against the server URL) sent verbatim, as the SDK's auth() does.
      const selected = await auth.selectResourceURL(
        serverUrl,
        { clientMetadata: clientMetadata(redirectUri, null) } as never,
        resourceMetadata ?? undefined,
      );
      discovered = {
        authorizationServerUrl: info.authorizationServerUrl,
        metadata: info.authorizationServerMetadata,
        resourceMetadata,
        resource: selected ? (resourceMetadata?.resource ?? selected.href) : null,
        scope: resourceMetadata?.scopes_supported?.join(' ') || null,
      };
    } catch (error) {
      throw serverFailure('discovery', error, []);
    }
    const { metadata, authorizationServerUrl, scope, resource } = discovered;
    let client = known && known.discovered.authorizationServerUrl === authorizationServerUrl ? known.client : null;
    if (client === null) {
      if (!metadata.registration_endpoint) {
        throw new OAuthFailure(
          'refused',
          "The MCP server's authorization server does not allow dynamic client registration.",
          'no registration_endpoint',
        );
      }
      try {
        client = await auth.registerClient(authorizationServerUrl, {
          metadata,
          clientMetadata: clientMetadata(redirectUri, scope),
          ...(scope ? { scope } : {}),
          fetchFn,
        });
      } catch (error) {
        throw serverFailure('client registration', error, []);
      }
    }
    try {
      const started = await auth.startAuthorization(authorizationServerUrl, {
        metadata,
        clientInformation: client,
        redirectUrl: redirectUri,
        state,
        ...(scope ? { scope } : {}),
        ...(resource ? { resource } : {}),
      });
      if (!['https:', 'http:'].includes(started.authorizationUrl.protocol)) {
        throw new OAuthFailure(
          'refused',
          "The MCP server's authorization endpoint is not an http(s) URL.",
          started.authorizationUrl.protocol,
        );
      }
      return { authorizationUrl: started.authorizationUrl.href, codeVerifier: started.codeVerifier, discovered, client };
    } catch (error) {
      throw serverFailure('authorization', error, [client.client_secret]);
    }
  }

  async exchange(
    discovered: DiscoveredServer,
    client: OAuthClientInformationMixed,
    code: string,
    codeVerifier: string,
    redirectUri: string,
    now: number,
  ): Promise<TokenSet> {
    const auth = await sdkAuth();
    try {
      const tokens = await auth.exchangeAuthorization(discovered.authorizationServerUrl, {
        metadata: discovered.metadata,
        clientInformation: client,
        authorizationCode: code,
        codeVerifier,
        redirectUri,
        ...(discovered.resource ? { resource: discovered.resource } : {}),
        fetchFn: this.fetcher(),
      });
      return tokenSetOf(tokens, null, now);
    } catch (error) {
      throw serverFailure('authorization code', error, [code, codeVerifier, client.client_secret]);
    }
  }

  async refresh(discovered: DiscoveredServer, client: OAuthClientInformationMixed, refreshToken: string, now: number): Promise<TokenSet> {
    const auth = await sdkAuth();
    try {
      const tokens = await auth.refreshAuthorization(discovered.authorizationServerUrl, {
        metadata: discovered.metadata,
        clientInformation: client,
        refreshToken,
        ...(discovered.resource ? { resource: discovered.resource } : {}),
        fetchFn: this.fetcher(),
      });
      return tokenSetOf(tokens, refreshToken, now);
    } catch (error) {
      throw serverFailure('refresh', error, [refreshToken, client.client_secret]);
    }
  }

  /**
   * Revokes a token (RFC 7009) where the authorization server has a revocation endpoint (false
   * when it has none): the MCP SDK has no revocation, so openid-client makes the request, over
   * the outbound guard.
   */
  async revoke(
    discovered: DiscoveredServer,
    client: OAuthClientInformationMixed,
    token: string,
    hint: 'refresh_token' | 'access_token',
  ): Promise<boolean> {
    const endpoint = (discovered.metadata as { revocation_endpoint?: string }).revocation_endpoint;
    if (!endpoint) return false;
    try {
      const metadata = { ...discovered.metadata, issuer: discovered.metadata.issuer } as unknown as oidc.ServerMetadata;
      const secret = client.client_secret;
      const config = new oidc.Configuration(
        metadata,
        client.client_id,
        secret ?? undefined,
        secret ? oidc.ClientSecretPost(secret) : oidc.None(),
      );
      config[oidc.customFetch] = this.fetcher() as never;
      if (endpoint.startsWith('http:')) oidc.allowInsecureRequests(config);
      await oidc.tokenRevocation(config, token, { token_type_hint: hint });
      return true;
    } catch (error) {
      throw serverFailure('revocation', error, [token, client.client_secret]);
    }
  }
}

function tokenSetOf(tokens: OAuthTokens, previousRefresh: string | null, now: number): TokenSet {
  return {
    accessToken: tokens.access_token,
    refreshToken: tokens.refresh_token ?? previousRefresh,
    tokenType: tokens.token_type || 'bearer',
    scope: tokens.scope ?? null,
    expiresAt: expiresAtOf(tokens.expires_in, now),
    account: null,
  };
}
