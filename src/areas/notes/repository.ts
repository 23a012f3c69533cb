import type { Insertable, Updateable } from 'kysely';
import type { Notes } from '../../../generated/db';
import type { PageRequest } from '../../http/pagination';
import type { Database } from '../../platform/db';

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

/** The query of the `limit + 1` rows of a page of the owner's notes (aliased `n`), newest first; nothing selected yet. */
export function pageOfNotes(db: Database, ownerUserId: string, filter: NoteFilter, page: PageRequest) {
  let query = db.selectFrom('notes as n').where('n.owner_user_id', '=', ownerUserId);
  if (filter.projectId !== undefined) query = query.where('n.project_id', '=', filter.projectId);
  if (filter.pinned !== undefined) query = query.where('n.pinned', '=', filter.pinned);
  if (page.beforeId !== null) query = query.where('n.id', '<', page.beforeId);
  return query.orderBy('n.id', 'desc').limit(page.limit + 1);
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
