import type { Insertable, Selectable, Updateable } from 'kysely';
import type { IntegrationAuthorizations, IntegrationConnections } from '../../../generated/db';
import type { Database } from '../../platform/db';

export type ConnectionRow = Selectable<IntegrationConnections>;
export type AuthorizationRow = Selectable<IntegrationAuthorizations>;

export function findConnection(db: Database, ownerUserId: string, integrationId: string) {
  return db.selectFrom('integration_connections').selectAll().where('owner_user_id', '=', ownerUserId).where('integration_id', '=', integrationId).executeTakeFirst();
}

export function connections(db: Database, ownerUserId: string) {
  return db.selectFrom('integration_connections').selectAll().where('owner_user_id', '=', ownerUserId).execute();
}

export function insertConnection(db: Database, row: Insertable<IntegrationConnections>) {
  return db.insertInto('integration_connections').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateConnection(db: Database, id: string, changes: Updateable<IntegrationConnections>) {
  return db.updateTable('integration_connections').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

/** Stores a refresh's tokens only over the version it refreshed (another refresh may have won). */
export function updateConnectionAtVersion(db: Database, id: string, version: number, changes: Updateable<IntegrationConnections>) {
  return db
    .updateTable('integration_connections')
    .set({ ...changes, version: version + 1 })
    .where('id', '=', id)
    .where('version', '=', version)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteConnection(db: Database, ownerUserId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('integration_connections').where('owner_user_id', '=', ownerUserId).where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export function insertAuthorization(db: Database, row: Insertable<IntegrationAuthorizations>) {
  return db.insertInto('integration_authorizations').values(row).execute();
}

/** Takes the authorization of a state: found and deleted in one statement, so it is used at most once. */
export function takeAuthorization(db: Database, stateHash: string) {
  return db.deleteFrom('integration_authorizations').where('state_hash', '=', stateHash).returningAll().executeTakeFirst();
}

/** Removes the authorizations that expired before `before` (every user's). */
export async function deleteExpiredAuthorizations(db: Database, before: Date): Promise<void> {
  await db.deleteFrom('integration_authorizations').where('expires_at', '<', before).execute();
}

/** Keeps the owner's `keep` newest authorizations under way for an integration, removing older ones. */
export async function trimAuthorizations(db: Database, ownerUserId: string, integrationId: string, keep: number): Promise<void> {
  const kept = db
    .selectFrom('integration_authorizations')
    .select('state_hash')
    .where('owner_user_id', '=', ownerUserId)
    .where('integration_id', '=', integrationId)
    .orderBy('created_at', 'desc')
    .limit(keep);
  await db
    .deleteFrom('integration_authorizations')
    .where('owner_user_id', '=', ownerUserId)
    .where('integration_id', '=', integrationId)
    .where('state_hash', 'not in', kept)
    .execute();
}
