import { type Insertable, type Selectable, sql } from 'kysely';
import type { ModelConnections, ModelPolicy } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { groupsOf, isGranted, PERMISSIONS } from '../../platform/db/access';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';
import { epochMs } from '../../platform/db/timestamps';

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

/**
 * Every connection whose models a user may call, oldest first (the order their models are listed
 * in): their own, and those an admin granted them (or a group of theirs) `use` of.
 */
export function usableConnections(db: Database, userId: string) {
  return db
    .selectFrom('model_connections')
    .selectAll()
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), isGranted(userId, 'connection', sql.ref('model_connections.id'), 'use')]))
    .orderBy('id', 'asc')
    .execute();
}

/** The permissions that let a grantee call a model (`use` and those that include it). */
const USE_OR_MORE = PERMISSIONS.slice(PERMISSIONS.indexOf('use'));

/**
 * The ids of the deployment's private models (some grant of `use` names them) that `userId` holds
 * no such grant on, directly or through a group: models that do not exist for them.
 */
export async function hiddenModelIds(db: Database, userId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('access_grants as p')
    .select('p.resource_id')
    .where('p.resource_kind', '=', 'model')
    .where('p.permission', 'in', USE_OR_MORE)
    .groupBy('p.resource_id')
    .having(sql<boolean>`not bool_or(${isGranted(userId, 'model', sql.ref('p.resource_id'), 'use')})`)
    .execute();
  return rows.map((row) => row.resource_id);
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

/** The columns a change of a policy (the deployment's or a group's) writes: the lists given, and who changed it when. */
function listValues(changes: { allow?: string[] | null; block?: string[]; updatedBy: string; at: Date }) {
  return {
    ...(changes.allow !== undefined ? { allow: changes.allow === null ? null : JSON.stringify(changes.allow) } : {}),
    ...(changes.block !== undefined ? { block: JSON.stringify(changes.block) } : {}),
    updated_by: changes.updatedBy,
    updated_at: changes.at,
  };
}

export function findPolicy(db: Database) {
  return db.selectFrom('model_policy').selectAll().where('id', '=', POLICY_ID).executeTakeFirst();
}

export function upsertPolicy(db: Database, changes: { allow?: string[] | null; block?: string[]; updatedBy: string; at: Date }) {
  const values = listValues(changes);
  return db
    .insertInto('model_policy')
    .values({ id: POLICY_ID, ...values })
    .onConflict((oc) => oc.column('id').doUpdateSet(values))
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The model policies of the groups `userId` is in (read with every choice of a model: a membership change holds at once). */
export function groupPoliciesOf(db: Database, userId: string) {
  return db
    .selectFrom('group_model_policies')
    .select(['allow', 'block'])
    .where(sql<boolean>`group_id in (${groupsOf(userId)})`)
    .execute();
}

function groupPolicies(db: Database) {
  return db
    .selectFrom('group_model_policies')
    .select(['group_id as id', 'allow', 'block', 'updated_by', epochMs('created_at'), epochMs('updated_at')]);
}

/** The groups' model policies, the newest group first; read a page at a time. */
export const groupPolicyList = listQuery({ id: 'group_id', rows: (db) => groupPolicies(db) });
export type GroupPolicyView = Awaited<ReturnType<typeof groupPolicyList.page>>['items'][number];

/** A group (or undefined when there is none) with its model policy (null when it has none). */
export async function findGroupPolicy(db: Database, groupId: string): Promise<{ policy: GroupPolicyView | null } | undefined> {
  const group = await db.selectFrom('groups').select('id').where('id', '=', groupId).executeTakeFirst();
  if (!group) return undefined;
  return { policy: (await groupPolicies(db).where('group_id', '=', groupId).executeTakeFirst()) ?? null };
}

/** Creates or changes a group's policy (the lists not given keep their value, or start empty). */
export async function upsertGroupPolicy(
  db: Database,
  groupId: string,
  changes: { allow?: string[] | null; block?: string[]; updatedBy: string; at: Date },
): Promise<void> {
  const values = listValues(changes);
  await db
    .insertInto('group_model_policies')
    .values({ group_id: groupId, ...values, created_at: changes.at })
    .onConflict((oc) => oc.column('group_id').doUpdateSet(values))
    .execute();
}

/** Whether the group had a policy (now deleted). */
export async function deleteGroupPolicy(db: Database, groupId: string): Promise<boolean> {
  const result = await db.deleteFrom('group_model_policies').where('group_id', '=', groupId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
