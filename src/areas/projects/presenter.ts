import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { Projects } from '../../../generated/db';

export function presentProject(row: Selectable<Projects>): components['schemas']['Project'] {
  return {
    projectId: row.id,
    name: row.name,
    description: row.description,
    instructions: row.instructions,
    color: row.color,
    parentId: row.parent_id,
    clientId: row.client_id,
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
  };
}
