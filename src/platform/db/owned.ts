import { type Kysely, type Selectable, type SelectQueryBuilder, sql, type Updateable } from 'kysely';
import type { DB } from '../../../generated/db';
import type { Database } from './index';
import { type ListQuery, listQuery } from './list-query';
import { epochMs } from './timestamps';

/** The tables whose records each belong to one user: an `id` and an `owner_user_id`. */
export type OwnedTable = { [T in keyof DB]: DB[T] extends { id: string; owner_user_id: string } ? T : never }[keyof DB];

/**
 * Kysely checks column names only on a table it knows, not on one that is a type parameter, so the
 * statements of this module are built on the untyped builder and typed at its boundary.
 */
const untyped = (db: Database) => db as unknown as Kysely<Record<string, { id: string; owner_user_id: string }>>;

/** One record of an owned table read, changed or deleted by its owner and id, the same way for every area. */

export function ownedRecords<T extends OwnedTable>(table: T) {
  type Row = Selectable<DB[T]>;
  const name: string = table;
  return {
    /** The record, or undefined when the owner has none with that id. */
    find(db: Database, ownerUserId: string, id: string): Promise<Row | undefined> {
      return untyped(db)
        .selectFrom(name)
        .selectAll()
        .where('owner_user_id', '=', ownerUserId)
        .where('id', '=', id)
        .executeTakeFirst() as Promise<Row | undefined>;
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

type Column<T extends OwnedTable> = keyof Selectable<DB[T]> & string;

/** A listed record: its id and `F` as they are, each of `M` as epoch milliseconds (null where the column may be). */
type Listed<R, F extends keyof R, M extends keyof R> = { id: string } & Pick<R, F> & {
    [K in M]: null extends R[K] ? number | null : number;
  };

/**
 * A user's records of an owned table, read a page at a time (see ListQuery): the id and `fields`
 * as they are, `times` as epoch milliseconds (epochMs), narrowed by equality on the column each
 * given argument of `filters` names (`{ projectId: 'project_id' }`: the argument, its column).
 *
 * A boolean, and the value of each argument named in `closed` (one of the document's enums), is
 * written into the statement rather than sent as a parameter: a plan prepared once for every
 * value (a generic plan) then still knows which value it reads, and so whether it is rare.
 */
export function ownedList<
  T extends OwnedTable,
  F extends Column<T>,
  M extends Column<T>,
  C extends Record<string, Column<T>> = Record<never, never>,
>(
  table: T,
  {
    fields,
    times,
    filters,
    closed = [],
  }: { fields: readonly F[]; times: readonly M[]; filters?: C; closed?: ReadonlyArray<keyof C & string> },
): ListQuery<{ ownerUserId: string } & { [K in keyof C]?: Selectable<DB[T]>[C[K]] }, DB, T, Listed<Selectable<DB[T]>, F, M>> {
  const name: string = table;
  const selection = ['id', ...fields, ...times.map((column) => epochMs(column))];
  const narrowing = Object.entries(filters ?? {});
  return listQuery({
    id: 'id',
    rows: (db, args: { ownerUserId: string } & Record<string, unknown>) => {
      let query = untyped(db)
        .selectFrom(name)
        .select(selection as never)
        .where('owner_user_id', '=', args.ownerUserId);
      for (const [argument, column] of narrowing) {
        const value = args[argument];
        if (value === undefined) continue;
        const inline = typeof value === 'boolean' || (closed as readonly string[]).includes(argument);
        query = query.where(column as never, '=', (inline ? sql.lit(value) : value) as never);
      }
      return query as unknown as SelectQueryBuilder<DB, T, Listed<Selectable<DB[T]>, F, M>>;
    },
  });
}
