import type { Insertable, Selectable } from 'kysely';
import type { Projects } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { listQuery } from '../../platform/db/list-query';
import { ownedRecords } from '../../platform/db/owned';
import { epochMs, type Instants } from '../../platform/db/timestamps';

export const { find: findProject, update: updateProject, remove: deleteProject } = ownedRecords('projects');

export function findProjectByClientId(db: Database, ownerUserId: string, clientId: string) {
  return db
    .selectFrom('projects')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('client_id', '=', clientId)
    .executeTakeFirst();
}

/** What a project is presented with: the list reads only these (not the search vector), and its times as epoch milliseconds. */
const PROJECT_FIELDS = ['id', 'name', 'description', 'instructions', 'color', 'parent_id', 'client_id'] as const;
export type ProjectView = Instants<Pick<Selectable<Projects>, (typeof PROJECT_FIELDS)[number] | 'created_at' | 'updated_at'>>;

/** The owner's projects, filtered by parent; read a page at a time. */
export const projectList = listQuery({
  id: 'id',
  rows: (db, { ownerUserId, parentId }: { ownerUserId: string; parentId?: string }) => {
    let query = db.selectFrom('projects').select([...PROJECT_FIELDS, epochMs('created_at'), epochMs('updated_at')]).where('owner_user_id', '=', ownerUserId);
    if (parentId !== undefined) query = query.where('parent_id', '=', parentId);
    return query;
  },
});

/** Inserts the project; with a clientId the caller already used, inserts nothing and returns undefined. */
export function insertProject(db: Database, row: Insertable<Projects>) {
  return db
    .insertInto('projects')
    .values(row)
    .onConflict((oc) =>
      oc.columns(['owner_user_id', 'client_id']).where('client_id', 'is not', null).doNothing(),
    )
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
