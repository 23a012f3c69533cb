import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { components } from '../../../generated/api';
import type { Database } from '../../platform/db';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { PageRequest } from '../../platform/pagination';
import { InvalidTokenError } from '../../platform/tokens';
import type { Actor, AuditService } from '../audit/service';
import type { PrincipalService } from '../principals/service';
import * as repo from './repository';

export type Scope = components['schemas']['AccessTokenScope'];
export const SCOPES: readonly Scope[] = ['read', 'write', 'chat', 'admin'];

/** Every personal access token starts so; the lookup part follows, then `_` and the secret. */
export const TOKEN_PREFIX = 'aiws_pat_';
/** The access tokens the service issues to OAuth clients (same length as TOKEN_PREFIX). */
export const OAUTH_TOKEN_PREFIX = 'aiws_oat_';
const LOOKUP_LENGTH = 12;
const DAY_MS = 86_400_000;
/** How often a token's last use is written back (the list shows it to the minute). */
const TOUCH_INTERVAL_MS = 60_000;

export const CREATE_ACTION = 'access_token.create';
export const REVOKE_ACTION = 'access_token.revoke';

export interface AccessTokenSettings {
  defaultTtlDays: number;
  maxTtlDays: number;
  maxPerUser: number;
}

/** What a verified token stands for. */
export interface AccessTokenIdentity {
  userId: string;
  tokenId: string;
  scopes: Scope[];
  expiresAt: number;
  /** The only resource (an absolute URL) an OAuth client's token may be used at, and that client. */
  resource?: string;
  clientId?: string;
}

const hashToken = (token: string) => createHash('sha256').update(token).digest();

export interface AccessTokenServiceDeps {
  db: Database;
  audit: AuditService;
  principals: Pick<PrincipalService, 'roles'>;
  settings: AccessTokenSettings;
  now?: () => number;
}

/**
 * Personal access tokens. The secret is random (256 bits), so its SHA-256 is all that is stored;
 * a token is found by its lookup part and compared in constant time. Nothing about a token is
 * cached: a revocation or expiry holds on the next request, on every instance.
 */
export class AccessTokenService {
  private readonly db: Database;
  private readonly audit: AuditService;
  private readonly principals: Pick<PrincipalService, 'roles'>;
  private readonly settings: AccessTokenSettings;
  private readonly now: () => number;

  constructor({ db, audit, principals, settings, now = Date.now }: AccessTokenServiceDeps) {
    this.db = db;
    this.audit = audit;
    this.principals = principals;
    this.settings = settings;
    this.now = now;
  }

  /** Whether `token` has the form of this service's access tokens (else it is an identity provider's). */
  recognises(token: string): boolean {
    return token.startsWith(TOKEN_PREFIX) || token.startsWith(OAUTH_TOKEN_PREFIX);
  }

  /**
   * The access token of an OAuth client's connection for `userId` (the authorization server's
   * grant), bound to `resource`: listed among the user's tokens under the client's name and
   * revocable there. `renewing` (the connection's token id, on a refresh) gives that token a new
   * secret and expiry instead of adding one; undefined when it was revoked (the connection ended).
   */
  async issueForClient(
    grant: {
      userId: string;
      clientId: string;
      clientName: string;
      scopes: Scope[];
      resource: string | null;
      ttlMs: number;
      renewing?: string;
    },
    db: Database = this.db,
  ): Promise<{ token: string; tokenId: string; expiresAt: number } | undefined> {
    const now = this.now();
    const lookup = randomBytes(9).toString('base64url');
    const token = `${OAUTH_TOKEN_PREFIX}${lookup}_${randomBytes(32).toString('base64url')}`;
    const secret = {
      lookup,
      secret_hash: hashToken(token).toString('base64url'),
      scopes: SCOPES.filter((scope) => grant.scopes.includes(scope)),
    };
    const expiresAt = now + grant.ttlMs;
    if (grant.renewing !== undefined) {
      const renewed = await repo.renewClientToken(db, grant.renewing, grant.clientId, { ...secret, expires_at: new Date(expiresAt) });
      return renewed ? { token, tokenId: grant.renewing, expiresAt } : undefined;
    }
    const tokenId = uuidv7(now);
    await repo.insertToken(db, {
      id: tokenId,
      owner_user_id: grant.userId,
      name: grant.clientName,
      ...secret,
      created_at: new Date(now),
      expires_at: new Date(expiresAt),
      client_id: grant.clientId,
      resource: grant.resource,
    });
    return { token, tokenId, expiresAt };
  }

  /** Ends an OAuth connection: revokes its access token (a reused refresh token). */
  async endConnection(userId: string, tokenId: string): Promise<void> {
    await repo.revokeToken(this.db, tokenId, 'oauth:refresh-reuse', new Date(this.now()), userId);
  }

  /** Revokes `token` if it is a live token issued to `clientId` (RFC 7009: an unknown token is no error). */
  async revokeClientToken(clientId: string, token: string): Promise<void> {
    const row = await this.find(token);
    if (row && row.client_id === clientId) await repo.revokeToken(this.db, row.id, `oauth-client:${clientId}`, new Date(this.now()));
  }

  async create(
    creator: Actor,
    input: { name: string; scopes: Scope[]; expiresAt?: number },
  ): Promise<{ row: repo.AccessTokenRow; token: string }> {
    const now = this.now();
    const expiresAt = input.expiresAt ?? now + this.settings.defaultTtlDays * DAY_MS;
    if (expiresAt <= now)
      throw errors.invalidRequest('expiresAt must be in the future.', [{ path: '/body/expiresAt', message: 'must be in the future' }]);
    if (expiresAt > now + this.settings.maxTtlDays * DAY_MS) {
      const message = `must be at most ${this.settings.maxTtlDays} days from now`;
      throw errors.invalidRequest(`expiresAt ${message}.`, [{ path: '/body/expiresAt', message }]);
    }
    if (input.scopes.includes('admin') && (await this.principals.roles(creator.userId)).length === 0) {
      throw errors.forbidden('The admin scope can only be given by a user who holds an administrative role.');
    }
    const lookup = randomBytes(9).toString('base64url');
    const token = `${TOKEN_PREFIX}${lookup}_${randomBytes(32).toString('base64url')}`;
    const row = await this.db.transaction().execute(async (trx) => {
      if ((await repo.countLiveTokens(trx, creator.userId, new Date(now))) >= this.settings.maxPerUser) {
        throw errors.conflict(`A user has at most ${this.settings.maxPerUser} live access tokens: revoke one first.`);
      }
      const inserted = await repo.insertToken(trx, {
        id: uuidv7(now),
        owner_user_id: creator.userId,
        name: input.name,
        lookup,
        secret_hash: hashToken(token).toString('base64url'),
        scopes: SCOPES.filter((scope) => input.scopes.includes(scope)),
        created_at: new Date(now),
        expires_at: new Date(expiresAt),
      });
      await this.audit.record(
        creator,
        {
          action: CREATE_ACTION,
          resourceType: 'access_token',
          resourceId: inserted.id,
          outcome: 'success',
          metadata: { name: input.name, scopes: inserted.scopes },
        },
        trx,
      );
      return inserted;
    });
    return { row, token };
  }

  list(userId: string, page: PageRequest) {
    return repo.ownTokenList.page(this.db, { ownerUserId: userId }, page);
  }

  /** Every user's tokens, or `userId`'s (administrators). */
  listAll(filter: { userId?: string }, page: PageRequest) {
    return repo.anyTokenList.page(this.db, { ownerUserId: filter.userId }, page);
  }

  /** A token of `userId`, or of anyone when `userId` is undefined (administrators); 404 otherwise. */
  async get(tokenId: string, userId?: string): Promise<repo.AccessTokenRow> {
    const row = await repo.findToken(this.db, tokenId, userId);
    if (!row) throw errors.notFound('No such access token.');
    return row;
  }

  /** Revokes a token of `ownerUserId` (any user's when undefined: an administrator), audited; 404 when there is none. */
  async revoke(actor: Actor, tokenId: string, ownerUserId?: string): Promise<repo.AccessTokenRow> {
    return this.db.transaction().execute(async (trx) => {
      const row = await repo.revokeToken(trx, tokenId, actor.userId, new Date(this.now()), ownerUserId);
      if (!row) throw errors.notFound('No such access token.');
      await this.audit.record(
        actor,
        {
          action: REVOKE_ACTION,
          resourceType: 'access_token',
          resourceId: row.id,
          outcome: 'success',
          metadata: { ownerUserId: row.owner_user_id },
        },
        trx,
      );
      return row;
    });
  }

  /** The user and scopes of a live token; InvalidTokenError (the reason in words) otherwise. Records its last use. */
  async verify(token: string): Promise<AccessTokenIdentity> {
    const row = await this.find(token);
    if (!row) throw new InvalidTokenError('The access token is not valid.');
    if (row.revoked_at) throw new InvalidTokenError('The access token was revoked.');
    const now = this.now();
    if (row.expires_at.getTime() <= now) throw new InvalidTokenError('The access token expired.');
    if (!row.last_used_at || now - row.last_used_at.getTime() > TOUCH_INTERVAL_MS) await repo.touchToken(this.db, row.id, new Date(now));
    const identity = { userId: row.owner_user_id, tokenId: row.id, scopes: row.scopes as Scope[], expiresAt: row.expires_at.getTime() };
    if (row.client_id === null) return identity;
    // A client's token without its resource (none is issued so) is refused rather than let loose.
    if (!row.resource) throw new InvalidTokenError('The access token is not valid.');
    return { ...identity, resource: row.resource, clientId: row.client_id };
  }

  /** The row of `token` (whatever its state) when its lookup part and secret match one. */
  private async find(token: string): Promise<repo.AccessTokenRow | undefined> {
    if (!this.recognises(token) || token[TOKEN_PREFIX.length + LOOKUP_LENGTH] !== '_') return undefined;
    const row = await repo.findByLookup(this.db, token.slice(TOKEN_PREFIX.length, TOKEN_PREFIX.length + LOOKUP_LENGTH));
    const prefix = row?.client_id ? OAUTH_TOKEN_PREFIX : TOKEN_PREFIX;
    return row && token.startsWith(prefix) && timingSafeEqual(hashToken(token), Buffer.from(row.secret_hash, 'base64url'))
      ? row
      : undefined;
  }
}
