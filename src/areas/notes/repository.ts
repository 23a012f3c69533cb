import { type Insertable, sql } from 'kysely';
import type { Notes } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { type AccessScope, isGranted, type SharedProject } from '../../platform/db/access';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { ownedRecords } from '../../platform/db/owned';
import { epochMs } from '../../platform/db/timestamps';

export const { find: findNote, update: updateNote, remove: deleteNote } = ownedRecords('notes');

/** The note if `userId` owns it or it is in a project shared with them. */
export function findReadableNote(db: Database, userId: string, id: string) {
  return db
    .selectFrom('notes')
    .selectAll()
    .where('id', '=', id)
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), isGranted(userId, 'project', sql.ref('notes.project_id'))]))
    .executeTakeFirst();
}

const NOTE_FIELDS = ['id', 'owner_user_id', 'title', 'content', 'project_id', 'pinned'] as const;

export interface NoteFilter {
  scope?: AccessScope;
  /** The projects shared with the user (sharedProjects): their notes are the shared part. */
  shared?: SharedProject[];
  projectId?: string;
  pinned?: boolean;
}

/**
 * The notes a user owns or may read in projects shared with them (per `scope`), filtered; read a
 * page at a time (not the search vector). Owned and shared notes are two parts, each from its own index.
 */
export const readableNoteList = listQuery({
  id: 'id',
  rows: (db, { userId, scope = 'all', shared = [], projectId, pinned }: NoteFilter & { userId: string }) => {
    let query = db.selectFrom('notes').select([...NOTE_FIELDS, epochMs('created_at'), epochMs('updated_at')]);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    // A boolean written into the statement (as ownedList does): a generic plan still knows which it reads.
    if (pinned !== undefined) query = query.where('pinned', '=', sql.lit(pinned));
    const owned = query.where('owner_user_id', '=', userId);
    // One part per shared project: its owner's notes in it, newest first from the (project, owner, id) index.
    const inShared = shared
      .filter((project) => projectId === undefined || project.id === projectId)
      .map((project) => query.where('project_id', '=', project.id).where('owner_user_id', '=', project.ownerUserId));
    if (scope === 'owned') return owned;
    if (scope === 'shared') return inShared.length > 0 ? inShared : query.where(sql.lit(false));
    return [owned, ...inShared];
  },
});
export type NoteView = ListedRecord<'notes', typeof readableNoteList>;

export function insertNote(db: Database, row: Insertable<Notes>) {
  return db.insertInto('notes').values(row).returningAll().executeTakeFirstOrThrow();
}
