import type { components } from '../../../generated/api';
import { millis } from '../../platform/db/timestamps';
import type { NoteView } from './repository';

/** A note as `userId` sees it: theirs, or one in a project shared with them. */
export function presentNote(row: NoteView, userId: string): components['schemas']['Note'] {
  return {
    noteId: row.id,
    ownerUserId: row.owner_user_id,
    access: row.owner_user_id === userId ? 'owner' : 'shared',
    title: row.title,
    content: row.content,
    projectId: row.project_id,
    pinned: row.pinned,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}
