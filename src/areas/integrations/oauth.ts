import type { AuthorizationServerMetadata, OAuthProtectedResourceMetadata } from '@modelcontextprotocol/sdk/shared/auth.js' with {
  'resolution-mode': 'import',
};
import { withoutAddresses } from '../../platform/ai/models';

/**
 * What the OAuth 2.0 flows share: the providers the operator configures, the tokens an
 * authorization server issues, what is discovered of an MCP server's own authorization server,
 * and how a step fails. The flows are in `provider-flow.ts` (openid-client) and `server-flow.ts`
 * (the MCP SDK's client auth), maintained libraries only.
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

/** `text` without the secrets given and without addresses, at most 200 characters. */
export function scrubbed(text: string, secrets: Array<string | null | undefined>): string {
  let clean = text;
  for (const secret of secrets) if (secret && secret.length >= 4) clean = clean.split(secret).join('[redacted]');
  return withoutAddresses(clean).replace(/\s+/g, ' ').trim().slice(0, 200);
}

/** When tokens that expire in `expiresIn` seconds (as the token endpoint says) expire, or null when it does not say. */
export const expiresAtOf = (expiresIn: number | undefined, now: number): Date | null =>
  typeof expiresIn === 'number' && Number.isFinite(expiresIn) ? new Date(now + Math.max(0, expiresIn) * 1000) : null;
