import type { components } from '../../../generated/api';
import { millis } from '../../platform/db/timestamps';
import type { SkillView } from './repository';
import type { KnowledgeScope, SkillRow, SkillTool } from './service';

export function presentSkill(row: SkillView | SkillRow): components['schemas']['Skill'] {
  return {
    skillId: row.id,
    name: row.name,
    description: row.description,
    instructions: row.instructions,
    greeting: row.greeting,
    enabled: row.enabled,
    projectId: row.project_id,
    model: row.model,
    tools: row.tools as unknown as SkillTool[],
    knowledgeScope: row.knowledge_scope as unknown as KnowledgeScope | null,
    starterPrompts: row.starter_prompts as unknown as string[],
    ownerUserId: row.owner_user_id,
    access: row.access,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}
