import { createHash, randomBytes } from 'node:crypto';
import type { Response } from 'express';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import {
  InvalidClientMetadataError,
  InvalidGrantError,
  InvalidScopeError,
  InvalidTargetError,
  InvalidTokenError as OAuthInvalidTokenError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthClientInformationFull, OAuthTokenRevocationRequest, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Database } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import { InvalidTokenError } from '../../platform/tokens';
import type { AccessTokenService, Scope } from '../access-tokens/service';
import * as repo from './repository';

/** The scopes an OAuth client may ask for (`admin` is for personal tokens only), and what it gets when it names none. */
export const OAUTH_SCOPES: readonly Scope[] = ['read', 'write', 'chat'];
const DEFAULT_SCOPES: Scope[] = ['read', 'write'];
/** How long a request waits for consent, and an approved code for its exchange. */
const REQUEST_TTL_MS = 10 * 60_000;
const CODE_TTL_MS = 60_000;
const ACCESS_TOKEN_TTL_MS = 60 * 60_000;
const REFRESH_TOKEN_TTL_MS = 30 * 86_400_000;
/** Each registration and request clears some of what anyone's unfinished sign-ins left behind. */
const CLEAN_UP_AFTER_MS = 86_400_000;
const CLEAN_UP_BATCH = 100;

const hash = (secret: string) => createHash('sha256').update(secret).digest('base64url');

/** What an authorization request keeps until it is decided and exchanged. */
interface StoredParams {
  state?: string;
  scopes: Scope[];
  redirectUri: string;
  codeChallenge: string;
  resource: string;
}

/** A request awaiting the user's consent, as the consent page shows it. */
export interface PendingAuthorization {
  requestId: string;
  clientName: string;
  clientUri: string | null;
  redirectUri: string;
  scopes: Scope[];
}

export interface OAuthServiceDeps {
  db: Database;
  accessTokens: AccessTokenService;
  /** The one protected resource, `<issuer>/mcp`: every token is bound to it (null: no authorization server). */
  resource: string | null;
  /** Where `/authorize` sends the browser for the user's consent. */
  consentPath: string;
  now?: () => number;
}

/**
 * The service as the OAuth 2.1 authorization server of its MCP resource, behind the MCP SDK's
 * `mcpAuthRouter` (which parses and checks the protocol's requests, PKCE included): public
 * clients register themselves; `authorize` parks the request and sends the browser to the consent
 * page (`consentPath`), where the signed-in user approves or denies it; an approved code is
 * exchanged once for an access token of `AccessTokenService` bound to the resource and a refresh
 * token that is replaced on each use.
 */
export class OAuthService implements OAuthServerProvider {
  private readonly db: Database;
  private readonly accessTokens: AccessTokenService;
  private readonly resource: string | null;
  private readonly consentPath: string;
  private readonly now: () => number;

  constructor({ db, accessTokens, resource, consentPath, now = Date.now }: OAuthServiceDeps) {
    this.db = db;
    this.accessTokens = accessTokens;
    this.resource = resource;
    this.consentPath = consentPath;
    this.now = now;
  }

  /**
   * The resource a token is issued for: this server's only one, whether the client names it
   * (RFC 8707 `resource`, which must then be exactly it) or not.
   */
  private resourceFor(requested: URL | undefined): string {
    if (this.resource === null) throw new InvalidTargetError('This service has no OAuth-protected resource.');
    if (requested !== undefined && requested.href !== this.resource) {
      throw new InvalidTargetError(`The only resource of this authorization server is ${this.resource}.`);
    }
    return this.resource;
  }

  get clientsStore(): OAuthRegisteredClientsStore {
    return {
      getClient: async (clientId) => {
        const row = await repo.findClient(this.db, clientId);
        return row ? (row.metadata as OAuthClientInformationFull) : undefined;
      },
      registerClient: async (client) => {
        // Public clients with PKCE only (what desktop MCP clients are): no client secret to keep.
        if ((client.token_endpoint_auth_method ?? 'client_secret_basic') !== 'none') {
          throw new InvalidClientMetadataError('Only public clients can register: set token_endpoint_auth_method to "none".');
        }
        const full: OAuthClientInformationFull = { ...client, client_id: uuidv7(), client_id_issued_at: Math.floor(this.now() / 1000) };
        delete full.client_secret;
        delete full.client_secret_expires_at;
        await repo.deleteUnusedClients(this.db, new Date(this.now() - CLEAN_UP_AFTER_MS), CLEAN_UP_BATCH);
        await repo.insertClient(this.db, { id: full.client_id, metadata: JSON.stringify(full), created_at: new Date(this.now()) });
        return full;
      },
    };
  }

  async authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response): Promise<void> {
    const requested = params.scopes ?? [];
    const unknown = requested.filter((scope) => !(OAUTH_SCOPES as readonly string[]).includes(scope));
    if (unknown.length > 0)
      throw new InvalidScopeError(`Unknown scope: ${unknown.join(' ')} (this server grants ${OAUTH_SCOPES.join(' ')}).`);
    const id = randomBytes(24).toString('base64url');
    const stored: StoredParams = {
      state: params.state,
      scopes: requested.length > 0 ? (requested as Scope[]) : DEFAULT_SCOPES,
      redirectUri: params.redirectUri,
      codeChallenge: params.codeChallenge,
      resource: this.resourceFor(params.resource),
    };
    const now = this.now();
    await repo.deleteEndedAuthorizations(this.db, new Date(now - CLEAN_UP_AFTER_MS), CLEAN_UP_BATCH);
    await repo.insertAuthorization(this.db, {
      id,
      client_id: client.client_id,
      params: JSON.stringify(stored),
      status: 'pending',
      created_at: new Date(now),
      expires_at: new Date(now + REQUEST_TTL_MS),
    });
    res.redirect(302, `${this.consentPath}?request=${encodeURIComponent(id)}`);
  }

  /** A request still awaiting consent, or undefined (unknown, decided or expired). */
  async pending(requestId: string): Promise<PendingAuthorization | undefined> {
    const row = await repo.findAuthorization(this.db, requestId);
    if (!row || row.status !== 'pending' || row.expires_at.getTime() <= this.now()) return undefined;
    const client = await repo.findClient(this.db, row.client_id);
    const metadata = client?.metadata as OAuthClientInformationFull | undefined;
    const params = row.params as unknown as StoredParams;
    return {
      requestId,
      clientName: metadata?.client_name ?? row.client_id,
      clientUri: metadata?.client_uri ?? null,
      redirectUri: params.redirectUri,
      scopes: params.scopes,
    };
  }

  /**
   * The user's decision on a pending request: the URL the browser is sent back to (the client's
   * redirect URI with a one-time `code`, or `error=access_denied`), or undefined when the request
   * is unknown, already decided or expired.
   */
  async decide(requestId: string, userId: string, approve: boolean): Promise<string | undefined> {
    const code = randomBytes(32).toString('base64url');
    const now = this.now();
    const row = await repo.decideAuthorization(
      this.db,
      requestId,
      { status: approve ? 'approved' : 'denied', userId, codeHash: approve ? hash(code) : null, expiresAt: new Date(now + CODE_TTL_MS) },
      new Date(now),
    );
    if (!row) return undefined;
    const params = row.params as unknown as StoredParams;
    const target = new URL(params.redirectUri);
    if (approve) target.searchParams.set('code', code);
    else {
      target.searchParams.set('error', 'access_denied');
      target.searchParams.set('error_description', 'The user denied the request.');
    }
    if (params.state !== undefined) target.searchParams.set('state', params.state);
    return target.href;
  }

  async challengeForAuthorizationCode(client: OAuthClientInformationFull, authorizationCode: string): Promise<string> {
    return (await this.approvedCode(client, authorizationCode)).params.codeChallenge;
  }

  async exchangeAuthorizationCode(
    client: OAuthClientInformationFull,
    authorizationCode: string,
    _codeVerifier?: string,
    redirectUri?: string,
    resource?: URL,
  ): Promise<OAuthTokens> {
    const { row, params } = await this.approvedCode(client, authorizationCode);
    if (redirectUri !== undefined && redirectUri !== params.redirectUri)
      throw new InvalidGrantError('redirect_uri does not match the authorization request.');
    this.resourceFor(resource);
    return this.db.transaction().execute(async (trx) => {
      if (!(await repo.exchangeCode(trx, row.id, new Date(this.now()))))
        throw new InvalidGrantError('The authorization code was already used or expired.');
      return this.issue(trx, client, { userId: row.user_id as string, scopes: params.scopes, resource: params.resource });
    });
  }

  async exchangeRefreshToken(
    client: OAuthClientInformationFull,
    refreshToken: string,
    scopes?: string[],
    resource?: URL,
  ): Promise<OAuthTokens> {
    const row = await repo.findRefreshToken(this.db, hash(refreshToken));
    const now = this.now();
    if (!row || row.client_id !== client.client_id || row.expires_at.getTime() <= now)
      throw new InvalidGrantError('The refresh token is not valid.');
    if (row.revoked_at) {
      // A used refresh token came back (OAuth 2.1 section 4.3.1): someone holds a copy, so the connection ends.
      await this.accessTokens.endConnection(row.user_id, row.access_token_id);
      throw new InvalidGrantError('The refresh token was already used; the connection is revoked: sign in again.');
    }
    const granted = row.scopes as Scope[];
    const narrowed = scopes && scopes.length > 0 ? scopes : granted;
    if (narrowed.some((scope) => !(granted as string[]).includes(scope)))
      throw new InvalidScopeError('A refresh can only keep or narrow the granted scopes.');
    this.resourceFor(resource);
    return this.db.transaction().execute(async (trx) => {
      if (!(await repo.revokeRefreshToken(trx, row.id, new Date(now)))) throw new InvalidGrantError('The refresh token was already used.');
      const grant = {
        userId: row.user_id,
        scopes: narrowed as Scope[],
        resource: this.resourceFor(undefined),
        renewing: row.access_token_id,
      };
      return this.issue(trx, client, grant);
    });
  }

  async verifyAccessToken(token: string): Promise<AuthInfo> {
    try {
      const identity = await this.accessTokens.verify(token);
      if (identity.clientId === undefined) throw new OAuthInvalidTokenError('Not a token of this authorization server.');
      return {
        token,
        clientId: identity.clientId,
        scopes: identity.scopes,
        expiresAt: Math.floor(identity.expiresAt / 1000),
        ...(identity.resource ? { resource: new URL(identity.resource) } : {}),
      };
    } catch (error) {
      if (error instanceof InvalidTokenError) throw new OAuthInvalidTokenError(error.message);
      throw error;
    }
  }

  async revokeToken(client: OAuthClientInformationFull, request: OAuthTokenRevocationRequest): Promise<void> {
    const refresh = await repo.findRefreshToken(this.db, hash(request.token));
    if (refresh && refresh.client_id === client.client_id) await repo.revokeRefreshToken(this.db, refresh.id, new Date(this.now()));
    else await this.accessTokens.revokeClientToken(client.client_id, request.token);
  }

  private async approvedCode(client: OAuthClientInformationFull, code: string) {
    const row = await repo.findByCode(this.db, hash(code));
    if (!row || row.client_id !== client.client_id || row.status !== 'approved' || row.expires_at.getTime() <= this.now()) {
      throw new InvalidGrantError('The authorization code is not valid.');
    }
    return { row, params: row.params as unknown as StoredParams };
  }

  /** An access token (new, or the connection's renewed) and a new refresh token of the same grant. */
  private async issue(
    db: Database,
    client: OAuthClientInformationFull,
    { userId, scopes, resource, renewing }: { userId: string; scopes: Scope[]; resource: string; renewing?: string },
  ): Promise<OAuthTokens> {
    const clientName = client.client_name ?? client.client_id;
    const grant = { userId, clientId: client.client_id, clientName, scopes, resource, ttlMs: ACCESS_TOKEN_TTL_MS, renewing };
    const access = await this.accessTokens.issueForClient(grant, db);
    // The user revoked the connection's token: refreshing ends with it.
    if (!access) throw new InvalidGrantError('The connection was revoked; sign in again.');
    const refreshToken = randomBytes(32).toString('base64url');
    const now = this.now();
    await repo.insertRefreshToken(db, {
      id: uuidv7(now),
      token_hash: hash(refreshToken),
      client_id: client.client_id,
      user_id: userId,
      access_token_id: access.tokenId,
      scopes,
      resource,
      created_at: new Date(now),
      expires_at: new Date(now + REFRESH_TOKEN_TTL_MS),
    });
    return {
      access_token: access.token,
      token_type: 'bearer',
      expires_in: Math.floor(ACCESS_TOKEN_TTL_MS / 1000),
      refresh_token: refreshToken,
      scope: scopes.join(' '),
    };
  }
}
