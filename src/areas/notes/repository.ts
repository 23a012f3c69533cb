import type { Insertable, Updateable } from 'kysely';
import type { Notes } from '../../../generated/db';
import type { PageRequest } from '../../platform/pagination';
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

/** What a page of the owner's notes is read by. */
export interface NotesPage {
  ownerUserId: string;
  filter: NoteFilter;
  page: PageRequest;
}

/** The query of the `limit + 1` rows of a page of the owner's notes (aliased `n`), newest first; nothing selected yet. */
export function pageOfNotes(db: Database, { ownerUserId, filter, page }: NotesPage) {
  let query = db.selectFrom('notes as n').where('n.owner_user_id', '=', ownerUserId);
  if (filter.projectId !== undefined) query = query.where('n.project_id', '=', filter.projectId);
  if (filter.pinned !== undefined) query = query.where('n.pinned', '=', filter.pinned);
  if (page.beforeId !== null) query = query.where('n.id', '<', page.beforeId);
  return query.orderBy('n.id', 'desc').limit(page.limit + 1);
}

/** Which of `pageOfNotes`'s optional conditions are present. */
export const notesPageShape = ({ filter, page }: NotesPage) =>
  `${filter.projectId !== undefined ? 'p' : ''}${filter.pinned !== undefined ? 'f' : ''}${page.beforeId !== null ? 'c' : ''}`;

/** The parameters of `pageOfNotes`, in the order it adds them. */
export function notesPageParameters({ ownerUserId, filter, page }: NotesPage): unknown[] {
  const values: unknown[] = [ownerUserId];
  if (filter.projectId !== undefined) values.push(filter.projectId);
  if (filter.pinned !== undefined) values.push(filter.pinned);
  if (page.beforeId !== null) values.push(page.beforeId);
  values.push(page.limit + 1);
  return values;
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
