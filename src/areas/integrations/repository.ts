import type { Insertable, Selectable, Updateable } from 'kysely';
import type { IntegrationAuthorizations, IntegrationConnections } from '../../../generated/db';
import type { Database } from '../../platform/db';

export type ConnectionRow = Selectable<IntegrationConnections>;
export type AuthorizationRow = Selectable<IntegrationAuthorizations>;

export function findConnection(db: Database, ownerUserId: string, integrationId: string) {
  return db
    .selectFrom('integration_connections')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('integration_id', '=', integrationId)
    .executeTakeFirst();
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

/**
 * Claims the refresh of a connection's tokens at `version` until `until`: only while it is active
 * at that version and no other request holds an unlapsed claim (at `now`). Null when it cannot.
 */
export function claimRefresh(db: Database, id: string, version: number, now: Date, until: Date) {
  return db
    .updateTable('integration_connections')
    .set({ refreshing_until: until })
    .where('id', '=', id)
    .where('version', '=', version)
    .where('status', '=', 'active')
    .where((eb) => eb.or([eb('refreshing_until', 'is', null), eb('refreshing_until', '<=', now)]))
    .returningAll()
    .executeTakeFirst();
}

/** Changes the connection only if the claim `until` on `version` still holds (no one else refreshed or claimed since); the claim ends. */
export function updateConnectionUnderClaim(
  db: Database,
  id: string,
  version: number,
  until: Date,
  changes: Updateable<IntegrationConnections>,
) {
  return db
    .updateTable('integration_connections')
    .set({ ...changes, version: version + 1, refreshing_until: null })
    .where('id', '=', id)
    .where('version', '=', version)
    .where('refreshing_until', '=', until)
    .returningAll()
    .executeTakeFirst();
}

/** Ends the claim `until` on `version` without changing the tokens (the refresh could not be made now). */
export async function releaseRefresh(db: Database, id: string, version: number, until: Date): Promise<void> {
  await db
    .updateTable('integration_connections')
    .set({ refreshing_until: null })
    .where('id', '=', id)
    .where('version', '=', version)
    .where('refreshing_until', '=', until)
    .execute();
}

export async function deleteConnection(db: Database, ownerUserId: string, id: string): Promise<boolean> {
  const result = await db
    .deleteFrom('integration_connections')
    .where('owner_user_id', '=', ownerUserId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export function insertAuthorization(db: Database, row: Insertable<IntegrationAuthorizations>) {
  return db.insertInto('integration_authorizations').values(row).execute();
}

/** Takes the authorization of a state: found and deleted in one statement, so it is used at most once. */
export function takeAuthorization(db: Database, stateHash: string) {
  return db.deleteFrom('integration_authorizations').where('state_hash', '=', stateHash).returningAll().executeTakeFirst();
}

/** Removes the owner's authorizations under way for an integration. */
export async function deleteAuthorizations(db: Database, ownerUserId: string, integrationId: string): Promise<void> {
  await db
    .deleteFrom('integration_authorizations')
    .where('owner_user_id', '=', ownerUserId)
    .where('integration_id', '=', integrationId)
    .execute();
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
