import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { Notes } from '../../../generated/db';

export function presentNote(row: Selectable<Notes>): components['schemas']['Note'] {
  return {
    noteId: row.id,
    title: row.title,
    content: row.content,
    projectId: row.project_id,
    pinned: row.pinned,
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
  };
}
