import type { Insertable, Selectable } from 'kysely';
import type { ModelConnections, ModelPolicy } from '../../../generated/db';
import type { Database } from '../../platform/db';
import type { ListedRecord } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';

export type ConnectionRow = Selectable<ModelConnections>;
export type PolicyRow = Selectable<ModelPolicy>;

/** The one row of the model policy. */
const POLICY_ID = 'default';

export const { find: findConnection, update: updateConnection, remove: deleteConnection } = ownedRecords('model_connections');

/** The owner's connections; read a page at a time (their keys only to say whether they have one). */
export const connectionList = ownedList('model_connections', {
  fields: ['kind', 'name', 'base_url', 'api_key', 'enabled_models', 'models', 'status', 'last_error'],
  times: ['last_tested_at', 'created_at', 'updated_at'],
});
export type ConnectionView = ListedRecord<'model_connections', typeof connectionList>;

/** Every connection of a user, oldest first (the order their models are listed in). */
export function allConnections(db: Database, ownerUserId: string) {
  return db.selectFrom('model_connections').selectAll().where('owner_user_id', '=', ownerUserId).orderBy('id', 'asc').execute();
}

export async function countConnections(db: Database, ownerUserId: string): Promise<number> {
  const row = await db
    .selectFrom('model_connections')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('owner_user_id', '=', ownerUserId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

export function insertConnection(db: Database, row: Insertable<ModelConnections>) {
  return db.insertInto('model_connections').values(row).returningAll().executeTakeFirstOrThrow();
}

/**
 * A call's outcome on a connection: `error` marks it failed with that message; null turns a failed
 * connection `active` again. Rows already in that state are not written.
 */
export async function markConnection(db: Database, ownerUserId: string, id: string, error: string | null): Promise<void> {
  let query = db.updateTable('model_connections').where('owner_user_id', '=', ownerUserId).where('id', '=', id);
  if (error === null) {
    query = query.set({ status: 'active', last_error: null }).where('status', '=', 'error');
  } else {
    query = query
      .set({ status: 'error', last_error: error })
      .where((eb) => eb.or([eb('status', '<>', 'error'), eb('last_error', 'is', null), eb('last_error', '<>', error)]));
  }
  await query.execute();
}

export function findPolicy(db: Database) {
  return db.selectFrom('model_policy').selectAll().where('id', '=', POLICY_ID).executeTakeFirst();
}

export function upsertPolicy(db: Database, changes: { allow?: string[] | null; block?: string[]; updatedBy: string; at: Date }) {
  const values = {
    ...(changes.allow !== undefined ? { allow: changes.allow === null ? null : JSON.stringify(changes.allow) } : {}),
    ...(changes.block !== undefined ? { block: JSON.stringify(changes.block) } : {}),
    updated_by: changes.updatedBy,
    updated_at: changes.at,
  };
  return db
    .insertInto('model_policy')
    .values({ id: POLICY_ID, ...values })
    .onConflict((oc) => oc.column('id').doUpdateSet(values))
    .returningAll()
    .executeTakeFirstOrThrow();
}
