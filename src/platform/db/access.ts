import { type RawBuilder, sql } from 'kysely';
import type { Database } from './index';

/**
 * The one read rule of shared resources (DESIGN §21): a user may reach a resource they do not own
 * when an access grant names it for them or for a group they are in, with at least the permission
 * asked. Repositories put these fragments into their own statements, so that a list, a search or a
 * lookup filters in SQL instead of checking rows after fetching them.
 */

/** What can be granted; the kinds of `access_grants.resource_kind`. */
export type ResourceKind = 'file' | 'project' | 'skill' | 'knowledge_source' | 'model' | 'connection';
export type Permission = 'read' | 'use' | 'edit';
export type PrincipalKind = 'user' | 'group';

/** Each permission includes those before it: `use` may read, `edit` may use and read. */
export const PERMISSIONS: readonly Permission[] = ['read', 'use', 'edit'];

/** The permissions that include `least`, as literals (a closed set, so that plans stay generic). */
function atLeast(least: Permission) {
  return sql.join(PERMISSIONS.slice(PERMISSIONS.indexOf(least)).map((permission) => sql.lit(permission)));
}

/** The groups `userId` is in, as a subquery of their ids. */
export function groupsOf(userId: string): RawBuilder<{ group_id: string }> {
  return sql`select gm.group_id from group_members gm where gm.user_id = ${userId}`;
}

/** The grants `userId` holds on resources of `kind`, directly or through a group, with at least `least`. */
function grantsHeld(userId: string, kind: ResourceKind, least: Permission) {
  return sql`from access_grants ag
             where ag.resource_kind = ${sql.lit(kind)} and ag.permission in (${atLeast(least)})
               and ((ag.principal_kind = 'user' and ag.principal_id = ${userId})
                    or (ag.principal_kind = 'group' and ag.principal_id in (${groupsOf(userId)})))`;
}

/** The ids of the resources of `kind` granted to `userId` with at least `least`, as a subquery. */
export function grantedIds(userId: string, kind: ResourceKind, least: Permission = 'read'): RawBuilder<{ resource_id: string }> {
  return sql`select ag.resource_id ${grantsHeld(userId, kind, least)}`;
}

/** Whether the resource of `kind` whose id is `id` (a column of the outer query) is granted to `userId`. */
export function isGranted(userId: string, kind: ResourceKind, id: RawBuilder<unknown>, least: Permission = 'read'): RawBuilder<boolean> {
  return sql<boolean>`exists (select 1 ${grantsHeld(userId, kind, least)} and ag.resource_id = ${id})`;
}

/**
 * Whether the file whose id and project are `fileId` and `projectId` (columns of the outer query)
 * is shared with `userId`: a grant on the file itself, or a read grant on its project (a project
 * is shared with its files).
 */
export function fileShared(userId: string, fileId: RawBuilder<unknown>, projectId: RawBuilder<unknown>): RawBuilder<boolean> {
  return sql<boolean>`(${isGranted(userId, 'file', fileId)} or ${isGranted(userId, 'project', projectId)})`;
}

/** Which of a user's readable records a list shows: their own, those shared with them, or both. */
export type AccessScope = 'all' | 'owned' | 'shared';

/** A project shared with the reader, and its owner (whose records in it the reader may read). */
export interface SharedProject {
  id: string;
  ownerUserId: string;
}

/**
 * The projects shared with `userId` (a read grant to them or a group of theirs), with their owners.
 * A list of records in shared projects reads each one's part from the (project, owner, id) index,
 * newest first: its cost follows what is shared, never the owners' other records.
 */
export async function sharedProjects(db: Database, userId: string): Promise<SharedProject[]> {
  const { rows } = await sql<SharedProject>`
    select p.id, p.owner_user_id as "ownerUserId" from projects p
    where p.id in (${grantedIds(userId, 'project')}) and p.owner_user_id <> ${userId}
    order by p.id`.execute(db);
  return rows;
}
