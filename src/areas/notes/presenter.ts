import type { components } from '../../../generated/api';
import { millis } from '../../platform/db/timestamps';
import type { NoteView } from './repository';

export function presentNote(row: NoteView): components['schemas']['Note'] {
  return {
    noteId: row.id,
    title: row.title,
    content: row.content,
    projectId: row.project_id,
    pinned: row.pinned,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}
