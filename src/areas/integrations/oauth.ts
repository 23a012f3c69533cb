import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthProtectedResourceMetadata,
  AuthorizationServerMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js' with { 'resolution-mode': 'import' };
import * as oidc from 'openid-client';
import { errorDetail, withoutAddresses } from '../../platform/ai/models';
import {
  AddressNotAllowed,
  HostNotResolved,
  type Outbound,
  OutboundTimeout,
  RedirectRefused,
  ResponseTooLarge,
  UrlNotAllowed,
} from '../../platform/net/outbound';

/**
 * The OAuth 2.0 protocol, through maintained libraries only: openid-client for the providers the
 * operator configured (OpenID Connect discovery, PKCE, the code grant, refresh, revocation), and
 * the MCP SDK's client auth for MCP servers that announce their own authorization server (the MCP
 * authorization spec: protected-resource metadata, authorization server discovery, dynamic client
 * registration, PKCE and the resource indicator). Every request to an MCP server's authorization
 * server goes through the outbound guard; the operator's URLs are trusted.
 */

/** An operator-configured OAuth 2.0 / OpenID Connect provider (INTEGRATIONS). */
export interface IntegrationProvider {
  /** Lower-case id, such as `github`. */
  id: string;
  name: string;
  /** An OpenID Connect issuer whose endpoints are discovered; else the URLs below. */
  issuer: string | null;
  authorizationUrl: string | null;
  tokenUrl: string | null;
  revocationUrl: string | null;
  clientId: string;
  /** Null for a public client (PKCE only). */
  clientSecret: string | null;
  scopes: string[];
  /** Extra parameters of the authorization request (`access_type=offline`…). */
  authorizationParams: Record<string, string>;
}

/** Tokens as an authorization server issued them. */
export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  tokenType: string;
  scope: string | null;
  expiresAt: Date | null;
  /** Who the user is there (an ID token's email, name or subject), when it says. */
  account: string | null;
}

/**
 * What was found and registered for an MCP server's own authorization server, kept with the
 * authorization and then the connection (the client information is a secret: sealed apart).
 */
export interface DiscoveredServer {
  authorizationServerUrl: string;
  metadata: AuthorizationServerMetadata;
  resourceMetadata: OAuthProtectedResourceMetadata | null;
  /** The RFC 8707 resource indicator sent with every request, if any. */
  resource: string | null;
  scope: string | null;
}

/**
 * A step of a flow failed. `refused`: the authorization server said no (a refresh token that no
 * longer works: the user connects again); `unavailable`: it could not be reached or failed (try
 * again later). `message` is safe to show and store (no token, no address); `detail` is for logs.
 */
export class OAuthFailure extends Error {
  override name = 'OAuthFailure';
  constructor(
    readonly kind: 'refused' | 'unavailable',
    message: string,
    readonly detail: string,
  ) {
    super(message);
  }
}

/** What the service calls itself when it registers with an authorization server. */
export const CLIENT_NAME = 'AI Workspace Service';
/** The most bytes an answer of an MCP server's authorization server may have. */
const MAX_ANSWER_BYTES = 256 * 1024;

/** `text` without the secrets given and without addresses, at most 200 characters. */
export function scrubbed(text: string, secrets: Array<string | null | undefined>): string {
  let clean = text;
  for (const secret of secrets) if (secret && secret.length >= 4) clean = clean.split(secret).join('[redacted]');
  return withoutAddresses(clean).replace(/\s+/g, ' ').trim().slice(0, 200);
}

/** The account an ID token names: email, preferred username, name or subject. */
function accountOf(claims: Record<string, unknown> | undefined): string | null {
  if (!claims) return null;
  for (const key of ['email', 'preferred_username', 'name', 'sub']) {
    const value = claims[key];
    if (typeof value === 'string' && value.trim() !== '') return value.slice(0, 200);
  }
  return null;
}

const expiresAtOf = (expiresIn: number | undefined, now: number): Date | null =>
  typeof expiresIn === 'number' && Number.isFinite(expiresIn) ? new Date(now + Math.max(0, expiresIn) * 1000) : null;

/** Why an openid-client call failed, as an OAuthFailure (`secrets` are removed from every text). */
function providerFailure(step: string, error: unknown, secrets: Array<string | null | undefined>): OAuthFailure {
  const detail = scrubbed(errorDetail(error), secrets);
  if (error instanceof oidc.ResponseBodyError) {
    const described = error.error_description ? `: ${scrubbed(error.error_description, secrets)}` : '';
    const kind =
      error.status >= 500 || error.error === 'server_error' || error.error === 'temporarily_unavailable' ? 'unavailable' : 'refused';
    return new OAuthFailure(kind, `The provider refused the ${step} (${scrubbed(error.error, secrets)}${described}).`, detail);
  }
  if (error instanceof oidc.AuthorizationResponseError) {
    return new OAuthFailure('refused', `The provider refused the authorization (${scrubbed(error.error, secrets)}).`, detail);
  }
  const code = (error as { code?: unknown }).code;
  if (error instanceof oidc.ClientError && code !== 'OAUTH_TIMEOUT' && typeof code === 'string' && !/RESPONSE_IS_NOT_CONFORM/.test(code)) {
    return new OAuthFailure(
      'refused',
      `The provider's answer to the ${step} was not accepted (${scrubbed(error.message, secrets)}).`,
      detail,
    );
  }
  return new OAuthFailure('unavailable', `The provider could not be reached for the ${step}.`, detail);
}

/** Builds and caches the openid-client configuration of one operator-configured provider. */
export class ProviderFlow {
  private configuration: Promise<oidc.Configuration> | null = null;

  constructor(
    readonly provider: IntegrationProvider,
    private readonly timeoutMs: number,
  ) {}

  /** The authorization URL: PKCE (S256), the state, the configured scopes and parameters. */
  async authorizationUrl(redirectUri: string, state: string, codeVerifier: string): Promise<string> {
    const config = await this.config();
    const url = oidc.buildAuthorizationUrl(config, {
      ...this.provider.authorizationParams,
      redirect_uri: redirectUri,
      ...(this.provider.scopes.length > 0 ? { scope: this.provider.scopes.join(' ') } : {}),
      code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
      state,
    });
    return url.href;
  }

  /** Exchanges the code the callback received (`callbackUrl`: the redirect URI with the callback's query). */
  async exchange(callbackUrl: URL, state: string, codeVerifier: string, now: number): Promise<TokenSet> {
    const config = await this.config();
    try {
      const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
        pkceCodeVerifier: codeVerifier,
        expectedState: state,
        idTokenExpected: this.provider.issuer !== null && this.provider.scopes.includes('openid'),
      });
      return this.tokenSet(tokens, null, now);
    } catch (error) {
      throw providerFailure('authorization code', error, [callbackUrl.searchParams.get('code'), codeVerifier, this.provider.clientSecret]);
    }
  }

  async refresh(refreshToken: string, now: number): Promise<TokenSet> {
    const config = await this.config();
    try {
      return this.tokenSet(await oidc.refreshTokenGrant(config, refreshToken), refreshToken, now);
    } catch (error) {
      throw providerFailure('refresh', error, [refreshToken, this.provider.clientSecret]);
    }
  }

  /** Revokes a token where the provider has a revocation endpoint; false when it has none. */
  async revoke(token: string, hint: 'refresh_token' | 'access_token'): Promise<boolean> {
    const config = await this.config();
    if (!config.serverMetadata().revocation_endpoint) return false;
    try {
      await oidc.tokenRevocation(config, token, { token_type_hint: hint });
      return true;
    } catch (error) {
      throw providerFailure('revocation', error, [token, this.provider.clientSecret]);
    }
  }

  private tokenSet(
    tokens: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
    previousRefresh: string | null,
    now: number,
  ): TokenSet {
    return {
      accessToken: tokens.access_token,
      refreshToken: tokens.refresh_token ?? previousRefresh,
      tokenType: tokens.token_type ?? 'bearer',
      scope: tokens.scope ?? null,
      expiresAt: expiresAtOf(tokens.expiresIn(), now),
      account: accountOf(tokens.claims() as Record<string, unknown> | undefined),
    };
  }

  /** The configuration: discovered from the issuer (once it works), or built from the configured URLs. */
  private config(): Promise<oidc.Configuration> {
    this.configuration ??= this.build().catch((error: unknown) => {
      this.configuration = null;
      throw error instanceof OAuthFailure ? error : providerFailure('discovery', error, [this.provider.clientSecret]);
    });
    return this.configuration;
  }

  private async build(): Promise<oidc.Configuration> {
    const { issuer, authorizationUrl, tokenUrl, revocationUrl, clientId, clientSecret } = this.provider;
    const insecure = [issuer, authorizationUrl, tokenUrl].some((url) => url?.startsWith('http:'));
    const timeout = Math.max(1, Math.ceil(this.timeoutMs / 1000));
    let config: oidc.Configuration;
    if (issuer !== null) {
      config = await oidc.discovery(new URL(issuer), clientId, clientSecret ?? undefined, clientSecret === null ? oidc.None() : undefined, {
        timeout,
        ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
      });
    } else {
      const metadata: oidc.ServerMetadata = {
        // No issuer is configured: the authorization endpoint's origin stands in (no ID token is checked against it).
        issuer: new URL(authorizationUrl as string).origin,
        authorization_endpoint: authorizationUrl as string,
        token_endpoint: tokenUrl as string,
        ...(revocationUrl ? { revocation_endpoint: revocationUrl } : {}),
      };
      config = new oidc.Configuration(metadata, clientId, clientSecret ?? undefined, clientSecret === null ? oidc.None() : undefined);
      if (insecure) oidc.allowInsecureRequests(config);
    }
    config.timeout = timeout;
    return config;
  }
}

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
