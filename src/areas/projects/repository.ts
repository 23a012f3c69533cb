import type { Insertable } from 'kysely';
import type { Projects } from '../../../generated/db';
import type { Database } from '../../platform/db';
import type { ListedRecord } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';

export const { find: findProject, update: updateProject, remove: deleteProject } = ownedRecords('projects');

export function findProjectByClientId(db: Database, ownerUserId: string, clientId: string) {
  return db
    .selectFrom('projects')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('client_id', '=', clientId)
    .executeTakeFirst();
}

/** The owner's projects, filtered by parent; read a page at a time (not their search vectors). */
export const projectList = ownedList('projects', {
  fields: ['name', 'description', 'instructions', 'color', 'parent_id', 'client_id'],
  times: ['created_at', 'updated_at'],
  filters: { parentId: 'parent_id' },
});
export type ProjectView = ListedRecord<'projects', typeof projectList>;

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
