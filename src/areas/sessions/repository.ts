import type { Database } from '../../platform/db';

export function insertSession(db: Database, row: { tokenHash: string; userId: string; createdAt: Date; expiresAt: Date }) {
  return db
    .insertInto('sessions')
    .values({
      token_hash: row.tokenHash,
      user_id: row.userId,
      created_at: row.createdAt,
      last_seen_at: row.createdAt,
      expires_at: row.expiresAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The session if it is neither ended, past its absolute expiry, nor idle since `idleSince`. */
export function findLiveSession(db: Database, tokenHash: string, now: Date, idleSince: Date) {
  return db
    .selectFrom('sessions')
    .selectAll()
    .where('token_hash', '=', tokenHash)
    .where('ended_at', 'is', null)
    .where('expires_at', '>', now)
    .where('last_seen_at', '>', idleSince)
    .executeTakeFirst();
}

export async function touchSession(db: Database, tokenHash: string, now: Date): Promise<void> {
  await db.updateTable('sessions').set({ last_seen_at: now }).where('token_hash', '=', tokenHash).execute();
}

export async function endSession(db: Database, tokenHash: string, now: Date): Promise<boolean> {
  const result = await db
    .updateTable('sessions')
    .set({ ended_at: now })
    .where('token_hash', '=', tokenHash)
    .where('ended_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
