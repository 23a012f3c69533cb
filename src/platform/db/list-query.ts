import { type CompiledQuery, type Selectable, type SelectQueryBuilder, sql } from 'kysely';
import type { DB } from '../../../generated/db';
import { type PageRequest, toPage } from '../pagination';
import { type Database, rowsOf } from './index';
import type { Instants } from './timestamps';

/**
 * Stands for one argument's value while a list query is built for a shape; the value takes its
 * place among the compiled parameters when the query runs. Using it as anything but a value handed
 * to Kysely (text, a number, a comparison's operand in code) throws at the shape's first use.
 */
class Placeholder {
  constructor(readonly key: string) {}
  toString(): never {
    throw new Error(`the list argument "${this.key}" may only be passed to Kysely as a value`);
  }
  valueOf(): never {
    return this.toString();
  }
}

const CURSOR = new Placeholder('(cursor)');
const LIMIT = new Placeholder('(limit)');

/** What a repository declares for one collection: its query, written once. */
export interface ListDefinition<A extends object, QDB, TB extends keyof QDB, R extends { id: string }> {
  /**
   * The rows of the collection for `args`, unordered and unlimited (cursor, order and limit are
   * added here). The query is built once per shape: an argument that is undefined or null is
   * given as it is, as are those named in `shapeBy`; every other one is a placeholder, which the
   * query may only pass to Kysely as a value.
   *
   * A collection that is the union of disjoint parts (a user's own files and those shared with
   * them) gives each part: each is read newest first on its own, from its own index, and the page
   * is the newest of their pages, where one query filtered by `a or b` would scan every row newer
   * than the page's last.
   */
  rows(db: Database, args: A): SelectQueryBuilder<QDB, TB, R> | ReadonlyArray<SelectQueryBuilder<QDB, TB, R>>;
  /** The column pages are ordered by, newest first, and cursors name (the record's id, e.g. `d.id`). */
  id: string;
  /** Arguments whose values choose the SQL itself (a scope, say), not only the values bound. */
  shapeBy?: ReadonlyArray<keyof A & string>;
}

interface Shape {
  query: CompiledQuery;
  /** For each compiled parameter, the argument it is (a key of the arguments, CURSOR or LIMIT), or null for a constant. */
  slots: Array<Placeholder | null>;
}

/**
 * The one way a collection is read a page at a time: the `limit + 1` newest records below the
 * cursor. Its query is built and compiled once per shape (which arguments are present, and the
 * values of `shapeBy`), so that Kysely's building and compiling are done once rather than on every
 * request (and the one text is planned once per connection, as every statement is on Postgres).
 */
export class ListQuery<A extends object, QDB, TB extends keyof QDB, R extends { id: string }> {
  private readonly shapes = new Map<string, Shape>();

  constructor(private readonly definition: ListDefinition<A, QDB, TB, R>) {}

  /** A page of the collection for `args`, read through `db` (the database or a transaction). */
  async page(db: Database, args: A, page: PageRequest): Promise<{ items: R[]; nextCursor: string | null }> {
    const { query, slots } = this.shape(db, args, page);
    const values = args as Record<string, unknown>;
    const parameters = query.parameters.map((constant, i) => {
      const slot = slots[i];
      if (!slot) return constant;
      return slot === CURSOR ? page.beforeId : slot === LIMIT ? page.limit + 1 : values[slot.key];
    });
    return toPage(await rowsOf<R>(db, { ...query, parameters } as CompiledQuery<R>), page.limit);
  }

  private shape(db: Database, args: A, page: PageRequest): Shape {
    const shapeBy = this.definition.shapeBy ?? [];
    let key = page.beforeId === null ? '' : 'c';
    for (const [name, value] of Object.entries(args)) {
      const given = value === undefined ? 'u' : value === null ? 'n' : shapeBy.includes(name as keyof A & string) ? `=${String(value)}` : '';
      key += `|${name}${given}`;
    }
    const known = this.shapes.get(key);
    if (known) return known;

    const stand = Object.fromEntries(
      Object.entries(args).map(([name, value]) => [
        name,
        value === undefined || value === null || shapeBy.includes(name as keyof A & string) ? value : new Placeholder(name),
      ]),
    ) as A;
    const id = sql.ref(this.definition.id);
    const newest = (part: SelectQueryBuilder<QDB, TB, R>) =>
      (page.beforeId === null ? part : part.where(sql<boolean>`${id} < ${CURSOR}`)).orderBy(id, 'desc').limit(LIMIT as unknown as number);
    const rows = this.definition.rows(db, stand);
    let query: CompiledQuery;
    if (!isParts(rows)) query = newest(rows).compile();
    else {
      // The union's rows are named by their columns alone.
      const column = sql.ref(this.definition.id.slice(this.definition.id.lastIndexOf('.') + 1));
      query = rows
        .map((part, i) => db.selectFrom(newest(part).as(`part${i}`)).selectAll())
        .reduce((union, part) => union.unionAll(part))
        .orderBy(column, 'desc')
        .limit(LIMIT as unknown as number)
        .compile();
    }
    const shape: Shape = { query, slots: query.parameters.map((value) => (value instanceof Placeholder ? value : null)) };
    this.shapes.set(key, shape);
    return shape;
  }
}

function isParts<T>(rows: T | ReadonlyArray<T>): rows is ReadonlyArray<T> {
  return Array.isArray(rows);
}

/** A collection's list query (see ListQuery). */
export const listQuery = <A extends object, QDB, TB extends keyof QDB, R extends { id: string }>(definition: ListDefinition<A, QDB, TB, R>) =>
  new ListQuery(definition);

/** Anything read a page at a time, as a ListQuery is. */
type Paged = { page: (...args: never[]) => Promise<{ items: unknown[] }> };

/** A table's row (by the table's name) or a row type as it is. */
type RowOf<T> = T extends keyof DB ? Selectable<DB[T]> : T;

/**
 * A record as its presenter takes it: the columns of `T` (a table's name, or a row type with what a
 * list adds, such as a count) that its list `L` reads, each timestamp a Date (a record read alone)
 * or epoch milliseconds (a listed one).
 */
export type ListedRecord<T, L extends Paged> = Instants<Pick<RowOf<T>, keyof Awaited<ReturnType<L['page']>>['items'][number] & keyof RowOf<T>>>;
