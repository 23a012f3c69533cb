import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { Notes } from '../../../generated/db';
import { epochMsText } from '../../platform/db/json-page';

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

/** The columns of a `notes` row aliased `n` that `noteItemJson` writes a note from. */
export const noteItemColumns = [
  'n.id',
  'n.title',
  'n.content',
  'n.project_id',
  'n.pinned',
  epochMsText('created_at').as('created_ms'),
  epochMsText('updated_at').as('updated_ms'),
] as const;

/** A row of `noteItemColumns`. */
export interface NoteItemRow {
  id: string;
  title: string;
  content: string;
  project_id: string | null;
  pinned: boolean;
  created_ms: string;
  updated_ms: string;
}

const text = JSON.stringify;

/** `presentNote`'s JSON, written from a row of `noteItemColumns` (a test holds the two equal). */
export const noteItemJson = (n: NoteItemRow): string =>
  `{"noteId":${text(n.id)},"title":${text(n.title)},"content":${text(n.content)},"projectId":${text(n.project_id)},` +
  `"pinned":${n.pinned},"createdAt":${n.created_ms},"updatedAt":${n.updated_ms}}`;
