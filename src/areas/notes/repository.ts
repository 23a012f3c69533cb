import { type Insertable, sql, type Updateable } from 'kysely';
import type { Notes } from '../../../generated/db';
import type { PageRequest } from '../../http/pagination';
import type { Database } from '../../platform/db';
import { epochMs, jsonPage } from '../../platform/db/json-page';
import type { JsonPage } from '../../platform/pagination';

export function findNote(db: Database, ownerUserId: string, id: string) {
  return db
    .selectFrom('notes')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export interface NoteFilter {
  projectId?: string;
  pinned?: boolean;
}

/** The `limit + 1` rows of a page of the owner's notes, newest first. */
function pageOfNotes(db: Database, ownerUserId: string, filter: NoteFilter, page: PageRequest) {
  let query = db.selectFrom('notes').selectAll().where('owner_user_id', '=', ownerUserId);
  if (filter.projectId !== undefined) query = query.where('project_id', '=', filter.projectId);
  if (filter.pinned !== undefined) query = query.where('pinned', '=', filter.pinned);
  if (page.beforeId !== null) query = query.where('id', '<', page.beforeId);
  return query.orderBy('id', 'desc').limit(page.limit + 1);
}

/** A page of notes rendered by Postgres, each as `presentNote` renders it. */
export function listNotesJson(db: Database, ownerUserId: string, filter: NoteFilter, page: PageRequest): Promise<JsonPage> {
  const note = sql`json_build_object('noteId', n.id, 'title', n.title, 'content', n.content, 'projectId', n.project_id,
    'pinned', n.pinned, 'createdAt', ${epochMs('created_at')}, 'updatedAt', ${epochMs('updated_at')})`;
  return jsonPage(db, pageOfNotes(db, ownerUserId, filter, page), note, page);
}

export function insertNote(db: Database, row: Insertable<Notes>) {
  return db.insertInto('notes').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateNote(db: Database, ownerUserId: string, id: string, changes: Updateable<Notes>) {
  return db
    .updateTable('notes')
    .set(changes)
    .where('owner_user_id', '=', ownerUserId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteNote(db: Database, ownerUserId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('notes').where('owner_user_id', '=', ownerUserId).where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
