import type { Insertable, Selectable } from 'kysely';
import type { AccessTokens } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { ownedList } from '../../platform/db/owned';
import { epochMs, epochMsOrNull } from '../../platform/db/timestamps';

export type AccessTokenRow = Selectable<AccessTokens>;

const LISTED = ['id', 'owner_user_id', 'name', 'lookup', 'scopes', 'client_id'] as const;
const TIMES = ['created_at', 'expires_at', 'last_used_at', 'revoked_at'] as const;

/** A user's tokens, newest first (never their hashes). */
export const ownTokenList = ownedList('access_tokens', {
  fields: ['owner_user_id', 'name', 'lookup', 'scopes', 'client_id'],
  times: TIMES,
});

/** Every user's tokens, or one user's, newest first: the administrators' list. */
export const anyTokenList = listQuery({
  id: 'id',
  rows: (db: Database, { ownerUserId }: { ownerUserId?: string }) => {
    let query = db
      .selectFrom('access_tokens')
      .select([...LISTED, epochMs('created_at'), epochMs('expires_at'), epochMsOrNull('last_used_at'), epochMsOrNull('revoked_at')]);
    if (ownerUserId !== undefined) query = query.where('owner_user_id', '=', ownerUserId);
    return query;
  },
});
export type AccessTokenView = ListedRecord<'access_tokens', typeof ownTokenList> | ListedRecord<'access_tokens', typeof anyTokenList>;

export async function insertToken(db: Database, row: Insertable<AccessTokens>): Promise<AccessTokenRow> {
  return db.insertInto('access_tokens').values(row).returningAll().executeTakeFirstOrThrow();
}

/** The token whose lookup part this is (revoked and expired ones too: the caller says why it is refused). */
export async function findByLookup(db: Database, lookup: string): Promise<AccessTokenRow | undefined> {
  return db.selectFrom('access_tokens').selectAll().where('lookup', '=', lookup).executeTakeFirst();
}

/** A token by id, of `ownerUserId` when given (any user's otherwise). */
export async function findToken(db: Database, id: string, ownerUserId?: string): Promise<AccessTokenRow | undefined> {
  let query = db.selectFrom('access_tokens').selectAll().where('id', '=', id);
  if (ownerUserId !== undefined) query = query.where('owner_user_id', '=', ownerUserId);
  return query.executeTakeFirst();
}

/** A user's personal tokens that still work at `now` (OAuth clients' are not counted). */
export async function countLiveTokens(db: Database, ownerUserId: string, now: Date): Promise<number> {
  const row = await db
    .selectFrom('access_tokens')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('owner_user_id', '=', ownerUserId)
    .where('client_id', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Revokes a live token (a revoked one stays as it was); the token as it now is, or undefined when there is none. */
export async function revokeToken(
  db: Database,
  id: string,
  by: string,
  now: Date,
  ownerUserId?: string,
): Promise<AccessTokenRow | undefined> {
  let query = db.updateTable('access_tokens').set({ revoked_at: now, revoked_by: by }).where('id', '=', id).where('revoked_at', 'is', null);
  if (ownerUserId !== undefined) query = query.where('owner_user_id', '=', ownerUserId);
  return (await query.returningAll().executeTakeFirst()) ?? findToken(db, id, ownerUserId);
}

export async function touchToken(db: Database, id: string, now: Date): Promise<void> {
  await db.updateTable('access_tokens').set({ last_used_at: now }).where('id', '=', id).execute();
}

/** Gives a live client token a new secret and expiry (an OAuth refresh); false when it was revoked. */
export async function renewClientToken(
  db: Database,
  id: string,
  clientId: string,
  renewal: { lookup: string; secret_hash: string; scopes: string[]; expires_at: Date },
): Promise<boolean> {
  const result = await db
    .updateTable('access_tokens')
    .set(renewal)
    .where('id', '=', id)
    .where('client_id', '=', clientId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
