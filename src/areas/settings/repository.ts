import type { Updateable } from 'kysely';
import type { UserSettings } from '../../../generated/db';
import type { Database } from '../../platform/db';

export function findSettings(db: Database, userId: string) {
  return db.selectFrom('user_settings').selectAll().where('user_id', '=', userId).executeTakeFirst();
}

/** Writes the given columns of the user's settings (creating the row), the others unchanged. */
export function upsertSettings(db: Database, userId: string, changes: Omit<Updateable<UserSettings>, 'user_id'> & { updated_at: Date }) {
  return db
    .insertInto('user_settings')
    .values({ ...changes, user_id: userId })
    .onConflict((oc) => oc.column('user_id').doUpdateSet(changes))
    .returningAll()
    .executeTakeFirstOrThrow();
}
