import type { Insertable } from 'kysely';
import type { Skills } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { listQuery } from '../../platform/db/list-query';
import { ownedRecords } from '../../platform/db/owned';

export const { find: findSkill, update: updateSkill, remove: deleteSkill } = ownedRecords('skills');

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

