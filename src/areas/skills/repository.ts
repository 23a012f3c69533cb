import type { Insertable, Updateable } from 'kysely';
import type { Skills } from '../../../generated/db';
import type { PageRequest } from '../../platform/pagination';
import type { Database } from '../../platform/db';

export function findSkill(db: Database, ownerUserId: string, id: string) {
  return db
    .selectFrom('skills')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export function listSkills(
  db: Database,
  ownerUserId: string,
  filter: { projectId?: string; enabled?: boolean },
  page: PageRequest,
) {
  let query = db.selectFrom('skills').selectAll().where('owner_user_id', '=', ownerUserId);
  if (filter.projectId !== undefined) query = query.where('project_id', '=', filter.projectId);
  if (filter.enabled !== undefined) query = query.where('enabled', '=', filter.enabled);
  if (page.beforeId !== null) query = query.where('id', '<', page.beforeId);
  return query.orderBy('id', 'desc').limit(page.limit + 1).execute();
}

export function insertSkill(db: Database, row: Insertable<Skills>) {
  return db.insertInto('skills').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateSkill(db: Database, ownerUserId: string, id: string, changes: Updateable<Skills>) {
  return db
    .updateTable('skills')
    .set(changes)
    .where('owner_user_id', '=', ownerUserId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteSkill(db: Database, ownerUserId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('skills').where('owner_user_id', '=', ownerUserId).where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
