import type { Insertable, Updateable } from 'kysely';
import type { Skills } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { listQuery } from '../../platform/db/list-query';

export function findSkill(db: Database, ownerUserId: string, id: string) {
  return db
    .selectFrom('skills')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The owner's skills, filtered; read a page at a time. */
export const skillList = listQuery({
  id: 'id',
  rows: (db, { ownerUserId, projectId, enabled }: { ownerUserId: string; projectId?: string; enabled?: boolean }) => {
    let query = db.selectFrom('skills').selectAll().where('owner_user_id', '=', ownerUserId);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    if (enabled !== undefined) query = query.where('enabled', '=', enabled);
    return query;
  },
});

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
