import type { Insertable } from 'kysely';
import type { Notes } from '../../../generated/db';
import type { Database } from '../../platform/db';
import type { ListedRecord } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';

export const { find: findNote, update: updateNote, remove: deleteNote } = ownedRecords('notes');

/** The owner's notes, filtered; read a page at a time (not the search vector). */
export const noteList = ownedList('notes', {
  fields: ['title', 'content', 'project_id', 'pinned'],
  times: ['created_at', 'updated_at'],
  filters: { projectId: 'project_id', pinned: 'pinned' },
});
export type NoteView = ListedRecord<'notes', typeof noteList>;

export function insertNote(db: Database, row: Insertable<Notes>) {
  return db.insertInto('notes').values(row).returningAll().executeTakeFirstOrThrow();
}
