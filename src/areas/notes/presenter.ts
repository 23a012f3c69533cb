import { type Selectable, sql } from 'kysely';
import type { components } from '../../../generated/api';
import type { Notes } from '../../../generated/db';
import { epochMs } from '../../platform/db/json-page';

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

/** `presentNote` as Postgres renders it, from a `notes` row aliased `n` (a test holds the two equal). */
export const noteJson = sql`json_build_object('noteId', n.id, 'title', n.title, 'content', n.content, 'projectId', n.project_id,
  'pinned', n.pinned, 'createdAt', ${epochMs('created_at')}, 'updatedAt', ${epochMs('updated_at')})`;
