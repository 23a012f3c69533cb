import type { Insertable } from 'kysely';
import type { Skills } from '../../../generated/db';
import type { Database } from '../../platform/db';
import type { ListedRecord } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';

export const { find: findSkill, update: updateSkill, remove: deleteSkill } = ownedRecords('skills');

/** The owner's skills, filtered; read a page at a time. */
export const skillList = ownedList('skills', {
  fields: ['name', 'description', 'instructions', 'greeting', 'enabled', 'project_id'],
  times: ['created_at', 'updated_at'],
  filters: { projectId: 'project_id', enabled: 'enabled' },
});
export type SkillView = ListedRecord<'skills', typeof skillList>;

export function insertSkill(db: Database, row: Insertable<Skills>) {
  return db.insertInto('skills').values(row).returningAll().executeTakeFirstOrThrow();
}
