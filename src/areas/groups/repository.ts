import { sql } from 'kysely';
import type { Database } from '../../platform/db';
import { listQuery } from '../../platform/db/list-query';
import { epochMs } from '../../platform/db/timestamps';
import { uuidv7 } from '../../platform/ids';

/** How many members a group (of the outer query) has, read with it. */
const memberCount = sql<number>`(select count(*)::int from group_members gm where gm.group_id = groups.id)`.as('member_count');

const GROUP_FIELDS = ['id', 'name', 'description', 'source'] as const;

function groups(db: Database) {
  return db.selectFrom('groups').select([...GROUP_FIELDS, memberCount, epochMs('created_at'), epochMs('updated_at')]);
}

/** The deployment's groups, newest first; read a page at a time. */
export const groupList = listQuery({ id: 'id', rows: (db) => groups(db) });
export type GroupView = Awaited<ReturnType<typeof groupList.page>>['items'][number];

export function findGroup(db: Database, id: string): Promise<GroupView | undefined> {
  return groups(db).where('id', '=', id).executeTakeFirst();
}

/** The group row, locked until the transaction ends (membership changes of one group in turn). */
export function lockGroup(db: Database, id: string) {
  return db.selectFrom('groups').select('id').where('id', '=', id).forUpdate().executeTakeFirst();
}

export async function insertGroup(db: Database, row: { id: string; name: string; description: string; at: Date }): Promise<void> {
  await db
    .insertInto('groups')
    .values({ id: row.id, name: row.name, description: row.description, source: 'manual', created_at: row.at, updated_at: row.at })
    .execute();
}

/** Whether the group existed (now changed). */
export async function updateGroup(db: Database, id: string, patch: { name?: string; description?: string; at: Date }): Promise<boolean> {
  const result = await db
    .updateTable('groups')
    .set({ name: patch.name, description: patch.description, updated_at: patch.at })
    .where('id', '=', id)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Whether the group existed (now deleted, with its memberships and, by trigger, its grants). */
export async function deleteGroup(db: Database, id: string): Promise<boolean> {
  const result = await db.deleteFrom('groups').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** A group's members, the most recently added first; read a page at a time. */
export const memberList = listQuery({
  id: 'id',
  rows: (db, { groupId }: { groupId: string }) =>
    db
      .selectFrom('group_members')
      .select(['id', 'user_id', 'source', epochMs('created_at')])
      .where('group_id', '=', groupId),
});
export type MemberView = Awaited<ReturnType<typeof memberList.page>>['items'][number];

/** Adds users as manual members; one who is a member already stays as they are. */
export async function addMembers(db: Database, groupId: string, userIds: string[], at: Date): Promise<void> {
  if (userIds.length === 0) return;
  await db
    .insertInto('group_members')
    .values(userIds.map((userId) => ({ id: uuidv7(at.getTime()), group_id: groupId, user_id: userId, source: 'manual', created_at: at })))
    .onConflict((oc) => oc.columns(['group_id', 'user_id']).doNothing())
    .execute();
}

export async function removeMembers(db: Database, groupId: string, userIds: string[]): Promise<void> {
  if (userIds.length === 0) return;
  await db.deleteFrom('group_members').where('group_id', '=', groupId).where('user_id', 'in', userIds).execute();
}

export async function countMembers(db: Database, groupId: string): Promise<number> {
  const row = await db
    .selectFrom('group_members')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('group_id', '=', groupId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The hash of the groups claim a user's memberships were last matched to, or undefined. */
export async function claimHashOf(db: Database, userId: string): Promise<string | undefined> {
  const row = await db.selectFrom('group_claim_syncs').select('claim_hash').where('user_id', '=', userId).executeTakeFirst();
  return row?.claim_hash;
}

export async function saveClaimHash(db: Database, userId: string, hash: string, at: Date): Promise<void> {
  await db
    .insertInto('group_claim_syncs')
    .values({ user_id: userId, claim_hash: hash, synced_at: at })
    .onConflict((oc) => oc.column('user_id').doUpdateSet({ claim_hash: hash, synced_at: at }))
    .execute();
}

/**
 * The ids of the groups named `names` (without case), making those missing as `identity_provider`
 * groups; a name another transaction makes at the same time is that group.
 */
export async function ensureGroupsNamed(db: Database, names: string[], at: Date): Promise<string[]> {
  if (names.length === 0) return [];
  await db
    .insertInto('groups')
    .values(names.map((name) => ({ id: uuidv7(at.getTime()), name, source: 'identity_provider', created_at: at, updated_at: at })))
    .onConflict((oc) => oc.doNothing())
    .execute();
  const rows = await db
    .selectFrom('groups')
    .select('id')
    .where(sql<boolean>`lower(name) in (${sql.join(names.map((name) => name.toLowerCase()))})`)
    .execute();
  return rows.map((row) => row.id);
}

/**
 * Makes the user's `identity_provider` memberships exactly `groupIds`: adds those missing (a
 * membership the user has already, manual or not, stays as it is) and removes the others; manual
 * memberships are untouched. Whether anything changed.
 */
export async function matchClaimMemberships(db: Database, userId: string, groupIds: string[], at: Date): Promise<boolean> {
  let removal = db.deleteFrom('group_members').where('user_id', '=', userId).where('source', '=', 'identity_provider');
  if (groupIds.length > 0) removal = removal.where('group_id', 'not in', groupIds);
  const removed = await removal.executeTakeFirst();
  if (groupIds.length === 0) return removed.numDeletedRows > 0n;
  const added = await db
    .insertInto('group_members')
    .values(
      groupIds.map((groupId) => ({
        id: uuidv7(at.getTime()),
        group_id: groupId,
        user_id: userId,
        source: 'identity_provider',
        created_at: at,
      })),
    )
    .onConflict((oc) => oc.columns(['group_id', 'user_id']).doNothing())
    .executeTakeFirst();
  return removed.numDeletedRows > 0n || (added.numInsertedOrUpdatedRows ?? 0n) > 0n;
}

/** The groups `userId` is in, the most recently joined first; read a page at a time. */
export const membershipList = listQuery({
  id: 'gm.id',
  rows: (db, { userId }: { userId: string }) =>
    db
      .selectFrom('group_members as gm')
      .innerJoin('groups as g', 'g.id', 'gm.group_id')
      .select(['gm.id', 'g.id as group_id', 'g.name', 'g.description', 'gm.source', epochMs('gm.created_at')])
      .where('gm.user_id', '=', userId),
});
export type MembershipView = Awaited<ReturnType<typeof membershipList.page>>['items'][number];

export async function isMember(db: Database, groupId: string, userId: string): Promise<boolean> {
  const row = await db
    .selectFrom('group_members')
    .select('group_id')
    .where('group_id', '=', groupId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return row !== undefined;
}
