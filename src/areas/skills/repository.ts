import { type Insertable, type RawBuilder, type Selectable, sql, type Updateable } from 'kysely';
import type { Skills } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { grantedIds, isGranted } from '../../platform/db/access';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { ownedRecords } from '../../platform/db/owned';
import { epochMs } from '../../platform/db/timestamps';

export const { remove: deleteSkill } = ownedRecords('skills');

/** What the caller may do with a skill: theirs, or what the strongest grant they hold on it allows. */
export type SkillAccess = 'owner' | 'read' | 'use' | 'edit';

/** The caller's access to the skill of the outer query (`skills.id`; null when they have none: the queries keep only those they have). */
function accessOf(userId: string): RawBuilder<SkillAccess> {
  const id = sql.ref('skills.id');
  return sql<SkillAccess>`case when skills.owner_user_id = ${userId} then 'owner'
    when ${isGranted(userId, 'skill', id, 'edit')} then 'edit'
    when ${isGranted(userId, 'skill', id, 'use')} then 'use'
    when ${isGranted(userId, 'skill', id, 'read')} then 'read' end`;
}

const SKILL_FIELDS = [
  'id',
  'owner_user_id',
  'name',
  'description',
  'instructions',
  'greeting',
  'enabled',
  'project_id',
  'model',
  'tools',
  'knowledge_scope',
  'starter_prompts',
] as const;

/** The skill with the caller's access to it, if they own it or hold a grant on it. */
export function findSkillFor(db: Database, userId: string, id: string) {
  return db
    .selectFrom('skills')
    .selectAll()
    .select(accessOf(userId).as('access'))
    .where('id', '=', id)
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), isGranted(userId, 'skill', sql.ref('skills.id'))]))
    .executeTakeFirst() as Promise<(Selectable<Skills> & { access: SkillAccess }) | undefined>;
}

/**
 * The skills a user owns and those granted to them (directly or through a group), filtered; read a
 * page at a time, the two parts each from their own index.
 */
export const skillList = listQuery({
  id: 'id',
  rows: (db, { userId, projectId, enabled }: { userId: string; projectId?: string; enabled?: boolean }) => {
    let query = db
      .selectFrom('skills')
      .select([...SKILL_FIELDS, epochMs('created_at'), epochMs('updated_at')])
      .select(accessOf(userId).as('access'));
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    // A boolean is written into the statement, as ownedList does.
    if (enabled !== undefined) query = query.where('enabled', '=', sql.lit(enabled));
    const owned = query.where('owner_user_id', '=', userId);
    // A semi-join on the grants: the part's cost follows what is granted, not the other owners' skills.
    const granted = query.where('owner_user_id', '<>', userId).where(sql<boolean>`skills.id in (${grantedIds(userId, 'skill')})`);
    return [owned, granted];
  },
});
export type SkillView = ListedRecord<'skills', typeof skillList> & { access: SkillAccess };

export function insertSkill(db: Database, row: Insertable<Skills>) {
  return db.insertInto('skills').values(row).returningAll().executeTakeFirstOrThrow();
}

/** The skill after `changes`, if `userId` owns it or holds an `edit` grant on it (else undefined). */
export function updateSkill(db: Database, userId: string, id: string, changes: Updateable<Skills>) {
  return db
    .updateTable('skills')
    .set(changes)
    .where('id', '=', id)
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), isGranted(userId, 'skill', sql.ref('skills.id'), 'edit')]))
    .returningAll()
    .executeTakeFirst();
}

/** How many skills `usableSkills` reads at most (the newest). */
const USABLE_MAX = 500;

/** The enabled skills `userId` may chat with (the newest USABLE_MAX): their own and those granted `use` or `edit`. */
export function usableSkills(db: Database, userId: string): Promise<Array<{ id: string; name: string }>> {
  return db
    .selectFrom('skills')
    .select(['id', 'name'])
    .where('enabled', '=', sql.lit(true))
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), isGranted(userId, 'skill', sql.ref('skills.id'), 'use')]))
    .orderBy('id', 'desc')
    .limit(USABLE_MAX)
    .execute();
}
