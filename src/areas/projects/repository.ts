import { type Insertable, sql } from 'kysely';
import type { Projects } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { type AccessScope, grantedIds, isGranted } from '../../platform/db/access';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { ownedRecords } from '../../platform/db/owned';
import { epochMs } from '../../platform/db/timestamps';

export const { find: findProject, update: updateProject, remove: deleteProject } = ownedRecords('projects');

/** The project if `userId` owns it or it is shared with them (a grant to them or a group of theirs). */
export function findReadableProject(db: Database, userId: string, id: string) {
  return db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', id)
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), isGranted(userId, 'project', sql.ref('projects.id'))]))
    .executeTakeFirst();
}

export function findProjectByClientId(db: Database, ownerUserId: string, clientId: string) {
  return db
    .selectFrom('projects')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('client_id', '=', clientId)
    .executeTakeFirst();
}

const PROJECT_FIELDS = ['id', 'owner_user_id', 'name', 'description', 'instructions', 'color', 'parent_id', 'client_id'] as const;

/**
 * The projects a user owns or was shared (per `scope`), filtered by parent; read a page at a time
 * (not their search vectors). Owned and shared projects are two parts, each read from its own index.
 */
export const readableProjectList = listQuery({
  id: 'id',
  rows: (db, { userId, scope = 'all', parentId }: { userId: string; scope?: AccessScope; parentId?: string }) => {
    let query = db.selectFrom('projects').select([...PROJECT_FIELDS, epochMs('created_at'), epochMs('updated_at')]);
    if (parentId !== undefined) query = query.where('parent_id', '=', parentId);
    const owned = query.where('owner_user_id', '=', userId);
    const shared = query.where('owner_user_id', '<>', userId).where(sql<boolean>`projects.id in (${grantedIds(userId, 'project')})`);
    return scope === 'owned' ? owned : scope === 'shared' ? shared : [owned, shared];
  },
});
export type ProjectView = ListedRecord<'projects', typeof readableProjectList>;

/** Inserts the project; with a clientId the caller already used, inserts nothing and returns undefined. */
export function insertProject(db: Database, row: Insertable<Projects>) {
  return db
    .insertInto('projects')
    .values(row)
    .onConflict((oc) => oc.columns(['owner_user_id', 'client_id']).where('client_id', 'is not', null).doNothing())
    .returningAll()
    .executeTakeFirst();
}

/** Whether the user owns any project. */
export async function ownsAny(db: Database, ownerUserId: string): Promise<boolean> {
  const row = await db.selectFrom('projects').select('id').where('owner_user_id', '=', ownerUserId).limit(1).executeTakeFirst();
  return row !== undefined;
}

export async function hasChildren(db: Database, id: string): Promise<boolean> {
  const row = await db.selectFrom('projects').select('id').where('parent_id', '=', id).limit(1).executeTakeFirst();
  return row !== undefined;
}
