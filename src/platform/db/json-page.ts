import { type RawBuilder, type SelectQueryBuilder, sql } from 'kysely';
import type { PageRequest } from '../../http/pagination';
import { type Database, preparedStatement } from './index';
import { type JsonPage, toPage } from '../pagination';

/**
 * Runs a list query (the `limit + 1` rows of a table aliased `n`, newest first, as the
 * repositories write them, with nothing selected yet) with Postgres rendering each row: `item`
 * builds one item's JSON from the columns of `n`, and the page is the first `limit` renderings
 * joined into an array, with the cursor after them. Rows are never parsed into objects only to be
 * serialized again. The statement is a plain select (an aggregate over a window, the whole page
 * rendered in SQL, tripled Postgres's time per page) run as a prepared statement: parsing and
 * planning it were a third of Postgres's time per page. The SQL rendering must equal the area's
 * presenter (a test compares them).
 */
export async function jsonPage<QDB, TB extends keyof QDB>(
  db: Database,
  rows: SelectQueryBuilder<QDB, TB, object>,
  item: RawBuilder<unknown>,
  page: PageRequest,
): Promise<JsonPage> {
  const query = rows.select([sql<string>`n.id`.as('id'), sql<string>`(${item})::text`.as('json')]).$castTo<{ id: string; json: string }>().compile();
  // Its two columns never change, whatever migrations do to the table: safe to keep prepared.
  preparedStatement(query.sql);
  const { rows: found } = await db.executeQuery(query);
  const { items, nextCursor } = toPage(found, page.limit);
  return { itemsJson: `[${items.map((row) => row.json).join(',')}]`, nextCursor };
}

/** Milliseconds since the epoch of a timestamptz column of `n`, as the presenters' `getTime()`. */
export const epochMs = (column: string) => sql`floor(extract(epoch from ${sql.ref(`n.${column}`)}) * 1000)::bigint`;
