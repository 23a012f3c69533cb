import type { Insertable, Selectable } from 'kysely';
import type { Skills } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { listQuery } from '../../platform/db/list-query';
import { ownedRecords } from '../../platform/db/owned';
import { epochMs, type Instants } from '../../platform/db/timestamps';

export const { find: findSkill, update: updateSkill, remove: deleteSkill } = ownedRecords('skills');

/** What a skill is presented with: the list reads only these, and its times as epoch milliseconds. */
const SKILL_FIELDS = ['id', 'name', 'description', 'instructions', 'greeting', 'enabled', 'project_id'] as const;
export type SkillView = Instants<Pick<Selectable<Skills>, (typeof SKILL_FIELDS)[number] | 'created_at' | 'updated_at'>>;

/** The owner's skills, filtered; read a page at a time. */
export const skillList = listQuery({
  id: 'id',
  rows: (db, { ownerUserId, projectId, enabled }: { ownerUserId: string; projectId?: string; enabled?: boolean }) => {
    let query = db.selectFrom('skills').select([...SKILL_FIELDS, epochMs('created_at'), epochMs('updated_at')]).where('owner_user_id', '=', ownerUserId);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    if (enabled !== undefined) query = query.where('enabled', '=', enabled);
    return query;
  },
});

export function insertSkill(db: Database, row: Insertable<Skills>) {
  return db.insertInto('skills').values(row).returningAll().executeTakeFirstOrThrow();
}

