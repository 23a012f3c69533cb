import type { components } from '../../../generated/api';
import { millis } from '../../platform/db/timestamps';
import type { ProjectView } from './repository';

export function presentProject(row: ProjectView): components['schemas']['Project'] {
  return {
    projectId: row.id,
    name: row.name,
    description: row.description,
    instructions: row.instructions,
    color: row.color,
    parentId: row.parent_id,
    clientId: row.client_id,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}
