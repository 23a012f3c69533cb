import { type CompiledQuery, type RawBuilder, type SelectQueryBuilder, sql } from 'kysely';
import type { PageRequest } from '../../http/pagination';
import { type Database, preparedStatement } from './index';
import { type JsonPage, toPage } from '../pagination';

/** A row of a rendered list query: the record's id (for the cursor) and its item's JSON text. */
interface RenderedRow {
  id: string;
  json: string;
}

/** How a repository describes a list query that `JsonPageQuery` compiles once per shape. */
export interface JsonPageSpec<A, QDB, TB extends keyof QDB> {
  /** The `limit + 1` rows of a table aliased `n`, newest first, as the repositories write them, with nothing selected yet. */
  rows(args: A): SelectQueryBuilder<QDB, TB, object>;
  /** One item's JSON, built from the columns of `n` (it must equal the area's presenter: a test compares them). */
  item: RawBuilder<unknown>;
  /** Which optional conditions `rows` adds for `args`: the SQL text depends on nothing else. */
  shape(args: A): string;
  /** The values `rows` passes as parameters for `args`, in the order it adds them. */
  parameters(args: A): readonly unknown[];
}

/**
 * A list query with Postgres rendering each row: the page is the first `limit` renderings joined
 * into an array, with the cursor after them. Rows are never parsed into objects only to be
 * serialized again. The statement is a plain select (an aggregate over a window, the whole page
 * rendered in SQL, tripled Postgres's time per page) run as a prepared statement (parsing and
 * planning it were a third of Postgres's time per page).
 *
 * It is built and compiled once per shape, not on every call: Kysely builds a query from frozen
 * nodes and compiles it by walking them, which with the re-hashing of the new text was a twentieth
 * of a list request's CPU and a tenth of its allocations. The first compilation of each shape
 * checks that the compiled parameters are those `parameters` gives, so a spec whose two functions
 * disagree fails at its first use (every shape is exercised by the tests) instead of binding
 * values to the wrong placeholders.
 */
export class JsonPageQuery<A extends { page: PageRequest }, QDB, TB extends keyof QDB> {
  private readonly compiled = new Map<string, CompiledQuery<RenderedRow>>();

  constructor(
    private readonly db: Database,
    private readonly spec: JsonPageSpec<A, QDB, TB>,
  ) {}

  async run(args: A): Promise<JsonPage> {
    const { rows: found } = await this.db.executeQuery(this.compile(args));
    const { items, nextCursor } = toPage(found, args.page.limit);
    return { itemsJson: `[${items.map((row) => row.json).join(',')}]`, nextCursor };
  }

  private compile(args: A): CompiledQuery<RenderedRow> {
    const shape = this.spec.shape(args);
    const parameters = this.spec.parameters(args);
    const template = this.compiled.get(shape);
    if (template) return { ...template, parameters };
    const query = this.spec
      .rows(args)
      .select([sql<string>`n.id`.as('id'), sql<string>`(${this.spec.item})::text`.as('json')])
      .$castTo<RenderedRow>()
      .compile();
    if (query.parameters.length !== parameters.length || query.parameters.some((value, i) => value !== parameters[i])) {
      throw new Error(`the list query of shape "${shape}" compiles with parameters other than its spec gives: ${query.sql}`);
    }
    // Its two columns never change, whatever migrations do to the table: safe to keep prepared.
    preparedStatement(query.sql);
    this.compiled.set(shape, query);
    return query;
  }
}

/** Milliseconds since the epoch of a timestamptz column of `n`, as the presenters' `getTime()`. */
export const epochMs = (column: string) => sql`floor(extract(epoch from ${sql.ref(`n.${column}`)}) * 1000)::bigint`;
