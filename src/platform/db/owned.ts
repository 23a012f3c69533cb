import type { Kysely, Selectable, Updateable } from 'kysely';
import type { DB } from '../../../generated/db';
import type { Database } from './index';

/** The tables whose records each belong to one user: an `id` and an `owner_user_id`. */
export type OwnedTable = { [T in keyof DB]: DB[T] extends { id: string; owner_user_id: string } ? T : never }[keyof DB];

/**
 * One record of an owned table read, changed or deleted by its owner and id, the same way for every
 * area. Kysely checks column names only on a table it knows, not on one that is a type parameter,
 * so the statements are built on the untyped builder and typed here, at the boundary.
 */
export function ownedRecords<T extends OwnedTable>(table: T) {
  const untyped = (db: Database) => db as unknown as Kysely<Record<string, { id: string; owner_user_id: string }>>;
  type Row = Selectable<DB[T]>;
  const name: string = table;
  return {
    /** The record, or undefined when the owner has none with that id. */
    find(db: Database, ownerUserId: string, id: string): Promise<Row | undefined> {
      return untyped(db).selectFrom(name).selectAll().where('owner_user_id', '=', ownerUserId).where('id', '=', id).executeTakeFirst() as Promise<Row | undefined>;
    },
    /** The record after `changes`, or undefined when the owner has none with that id. */
    update(db: Database, ownerUserId: string, id: string, changes: Updateable<DB[T]>): Promise<Row | undefined> {
      return untyped(db)
        .updateTable(name)
        .set(changes as never)
        .where('owner_user_id', '=', ownerUserId)
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirst() as Promise<Row | undefined>;
    },
    /** Whether the owner had a record with that id (now deleted). */
    async remove(db: Database, ownerUserId: string, id: string): Promise<boolean> {
      const result = await untyped(db).deleteFrom(name).where('owner_user_id', '=', ownerUserId).where('id', '=', id).executeTakeFirst();
      return result.numDeletedRows > 0n;
    },
  };
}
