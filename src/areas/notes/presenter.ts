import type { components } from '../../../generated/api';
import type { NoteView } from './repository';

export function presentNote(row: NoteView): components['schemas']['Note'] {
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
