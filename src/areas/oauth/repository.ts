import type { Insertable, Selectable } from 'kysely';
import type { OauthAuthorizations, OauthClients, OauthRefreshTokens } from '../../../generated/db';
import type { Database } from '../../platform/db';

export type ClientRow = Selectable<OauthClients>;
export type AuthorizationRow = Selectable<OauthAuthorizations>;
export type RefreshTokenRow = Selectable<OauthRefreshTokens>;

export async function insertClient(db: Database, row: Insertable<OauthClients>): Promise<void> {
  await db.insertInto('oauth_clients').values(row).execute();
}

export async function findClient(db: Database, id: string): Promise<ClientRow | undefined> {
  return db.selectFrom('oauth_clients').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function insertAuthorization(db: Database, row: Insertable<OauthAuthorizations>): Promise<void> {
  await db.insertInto('oauth_authorizations').values(row).execute();
}

export async function findAuthorization(db: Database, id: string): Promise<AuthorizationRow | undefined> {
  return db.selectFrom('oauth_authorizations').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Decides a pending, unexpired request (once): the request as decided, or undefined. */
export async function decideAuthorization(
  db: Database,
  id: string,
  decision: { status: 'approved' | 'denied'; userId: string; codeHash: string | null; expiresAt: Date },
  now: Date,
): Promise<AuthorizationRow | undefined> {
  return db
    .updateTable('oauth_authorizations')
    .set({ status: decision.status, user_id: decision.userId, code_hash: decision.codeHash, expires_at: decision.expiresAt })
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst();
}

export async function findByCode(db: Database, codeHash: string): Promise<AuthorizationRow | undefined> {
  return db.selectFrom('oauth_authorizations').selectAll().where('code_hash', '=', codeHash).executeTakeFirst();
}

/** Marks an approved code exchanged (it works once): whether this call did. */
export async function exchangeCode(db: Database, id: string, now: Date): Promise<boolean> {
  const result = await db
    .updateTable('oauth_authorizations')
    .set({ status: 'exchanged' })
    .where('id', '=', id)
    .where('status', '=', 'approved')
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function insertRefreshToken(db: Database, row: Insertable<OauthRefreshTokens>): Promise<void> {
  await db.insertInto('oauth_refresh_tokens').values(row).execute();
}

export async function findRefreshToken(db: Database, tokenHash: string): Promise<RefreshTokenRow | undefined> {
  return db.selectFrom('oauth_refresh_tokens').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
}

/** Revokes a live refresh token (rotation, or the client's revocation): whether this call did. */
export async function revokeRefreshToken(db: Database, id: string, now: Date): Promise<boolean> {
  const result = await db
    .updateTable('oauth_refresh_tokens')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Removes up to `limit` requests that ended before `before` (expired, decided or exchanged long ago). */
export async function deleteEndedAuthorizations(db: Database, before: Date, limit: number): Promise<void> {
  await db
    .deleteFrom('oauth_authorizations')
    .where('id', 'in', (eb) => eb.selectFrom('oauth_authorizations').select('id').where('expires_at', '<', before).limit(limit))
    .execute();
}

/** Removes up to `limit` clients registered before `before` that never got a token and have no request left. */
export async function deleteUnusedClients(db: Database, before: Date, limit: number): Promise<void> {
  await db
    .deleteFrom('oauth_clients')
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('oauth_clients as c')
        .select('c.id')
        .where('c.created_at', '<', before)
        .where(({ not, exists, selectFrom }) =>
          not(exists(selectFrom('access_tokens as t').select('t.id').whereRef('t.client_id', '=', 'c.id'))),
        )
        .where(({ not, exists, selectFrom }) =>
          not(exists(selectFrom('oauth_authorizations as a').select('a.id').whereRef('a.client_id', '=', 'c.id'))),
        )
        .limit(limit),
    )
    .execute();
}
