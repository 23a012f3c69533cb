import { type Selectable, type SelectQueryBuilder, sql } from 'kysely';
import type { DB } from '../../../generated/db';
import { type PageRequest, toPage } from '../pagination';
import type { Database } from './index';
import type { Instants } from './timestamps';

/** What a repository declares for one collection: its query, written once. */
export interface ListDefinition<A extends object, QDB, TB extends keyof QDB, R extends { id: string }> {
  /**
   * The rows of the collection for `args`, unordered and unlimited (cursor, order and limit are
   * added here).
   *
   * A collection that is the union of disjoint parts (a user's own files and those shared with
   * them) gives each part: each is read newest first on its own, from its own index, and the page
   * is the newest of their pages, where one query filtered by `a or b` would scan every row newer
   * than the page's last.
   */
  rows(db: Database, args: A): SelectQueryBuilder<QDB, TB, R> | ReadonlyArray<SelectQueryBuilder<QDB, TB, R>>;
  /** The column pages are ordered by, newest first, and cursors name (the record's id, e.g. `d.id`). */
  id: string;
}

/**
 * The one way a collection is read a page at a time (keyset pagination): the `limit + 1` newest
 * records below the cursor, so that the page knows whether another follows without a count.
 */
export class ListQuery<A extends object, QDB, TB extends keyof QDB, R extends { id: string }> {
  constructor(private readonly definition: ListDefinition<A, QDB, TB, R>) {}

  /** A page of the collection for `args`, read through `db` (the database or a transaction). */
  async page(db: Database, args: A, page: PageRequest): Promise<{ items: R[]; nextCursor: string | null }> {
    const id = sql.ref(this.definition.id);
    const newest = (part: SelectQueryBuilder<QDB, TB, R>) =>
      (page.beforeId === null ? part : part.where(sql<boolean>`${id} < ${page.beforeId}`)).orderBy(id, 'desc').limit(page.limit + 1);
    const rows = this.definition.rows(db, args);
    if (!isParts(rows)) return toPage(await newest(rows).execute(), page.limit);
    // The union's rows are named by their columns alone.
    const column = sql.ref(this.definition.id.slice(this.definition.id.lastIndexOf('.') + 1));
    const union = rows
      .map((part, i) => db.selectFrom(newest(part).as(`part${i}`)).selectAll())
      .reduce((all, part) => all.unionAll(part))
      .orderBy(column, 'desc')
      .limit(page.limit + 1);
    return toPage((await union.execute()) as R[], page.limit);
  }
}

function isParts<T>(rows: T | ReadonlyArray<T>): rows is ReadonlyArray<T> {
  return Array.isArray(rows);
}

/** A collection's list query (see ListQuery). */
export const listQuery = <A extends object, QDB, TB extends keyof QDB, R extends { id: string }>(
  definition: ListDefinition<A, QDB, TB, R>,
) => new ListQuery(definition);

/** Anything read a page at a time, as a ListQuery is. */
type Paged = { page: (...args: never[]) => Promise<{ items: unknown[] }> };

/** A table's row (by the table's name) or a row type as it is. */
type RowOf<T> = T extends keyof DB ? Selectable<DB[T]> : T;

/**
 * A record as its presenter takes it: the columns of `T` (a table's name, or a row type with what a
 * list adds, such as a count) that its list `L` reads, each timestamp a Date (a record read alone)
 * or epoch milliseconds (a listed one).
 */
export type ListedRecord<T, L extends Paged> = Instants<
  Pick<RowOf<T>, keyof Awaited<ReturnType<L['page']>>['items'][number] & keyof RowOf<T>>
>;
