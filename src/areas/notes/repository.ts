import type { Insertable, Selectable } from 'kysely';
import type { Notes } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { listQuery } from '../../platform/db/list-query';
import { ownedRecords } from '../../platform/db/owned';
import { epochMs, type Instants } from '../../platform/db/timestamps';

export const { find: findNote, update: updateNote, remove: deleteNote } = ownedRecords('notes');

/** What a note is presented with: the list reads only these (not the search vector), and its times as epoch milliseconds. */
const NOTE_FIELDS = ['id', 'title', 'content', 'project_id', 'pinned'] as const;
export type NoteView = Instants<Pick<Selectable<Notes>, (typeof NOTE_FIELDS)[number] | 'created_at' | 'updated_at'>>;

/** The owner's notes, filtered; read a page at a time. */
export const noteList = listQuery({
  id: 'id',
  rows: (db, { ownerUserId, projectId, pinned }: { ownerUserId: string; projectId?: string; pinned?: boolean }) => {
    let query = db.selectFrom('notes').select([...NOTE_FIELDS, epochMs('created_at'), epochMs('updated_at')]).where('owner_user_id', '=', ownerUserId);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    if (pinned !== undefined) query = query.where('pinned', '=', pinned);
    return query;
  },
});

export function insertNote(db: Database, row: Insertable<Notes>) {
  return db.insertInto('notes').values(row).returningAll().executeTakeFirstOrThrow();
}

