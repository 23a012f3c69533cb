import type { components } from '../../../generated/api';
import { millis } from '../../platform/db/timestamps';
import type { SkillView } from './repository';

export function presentSkill(row: SkillView): components['schemas']['Skill'] {
  return {
    skillId: row.id,
    name: row.name,
    description: row.description,
    instructions: row.instructions,
    greeting: row.greeting,
    enabled: row.enabled,
    projectId: row.project_id,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}
