import * as oidc from 'openid-client';
import { errorDetail } from '../../platform/ai/models';
import { expiresAtOf, type IntegrationProvider, OAuthFailure, scrubbed, type TokenSet } from './oauth';

/**
 * The operator's providers through openid-client: OpenID Connect discovery (or the configured
 * URLs), PKCE, the code grant, refresh and revocation. The operator's URLs are trusted.
 */

/** The account an ID token names: email, preferred username, name or subject. */
function accountOf(claims: Record<string, unknown> | undefined): string | null {
  if (!claims) return null;
  for (const key of ['email', 'preferred_username', 'name', 'sub']) {
    const value = claims[key];
    if (typeof value === 'string' && value.trim() !== '') return value.slice(0, 200);
  }
  return null;
}

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
