import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { Skills } from '../../../generated/db';

export function presentSkill(row: Selectable<Skills>): components['schemas']['Skill'] {
  return {
    skillId: row.id,
    name: row.name,
    description: row.description,
    instructions: row.instructions,
    greeting: row.greeting,
    enabled: row.enabled,
    projectId: row.project_id,
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
  };
}
