import type { components } from '../../../generated/api';
import { millis } from '../../platform/db/timestamps';
import type { ProjectView } from './repository';

/** A project as `userId` sees it: theirs, or shared with them. */
export function presentProject(row: ProjectView, userId: string): components['schemas']['Project'] {
  return {
    projectId: row.id,
    ownerUserId: row.owner_user_id,
    access: row.owner_user_id === userId ? 'owner' : 'shared',
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
