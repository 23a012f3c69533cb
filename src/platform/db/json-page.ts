import { type RawBuilder, type SelectQueryBuilder, sql } from 'kysely';
import type { PageRequest } from '../../http/pagination';
import { encodeCursor, type JsonPage } from '../pagination';
import type { Database } from './index';

/**
 * Runs a list query (`limit + 1` rows by id, newest first, as the repositories write them) and
 * lets Postgres render the page: `item` builds one item's JSON from the row alias `n`, and the
 * answer is the JSON array text of the first `limit` rows with the cursor after them. Rows are
 * never parsed into objects only to be serialized again. The SQL rendering must equal the
 * area's presenter (a test compares them).
 */
export async function jsonPage<DB, TB extends keyof DB>(
  db: Database,
  rows: SelectQueryBuilder<DB, TB, { id: string }>,
  item: RawBuilder<unknown>,
  page: PageRequest,
): Promise<JsonPage> {
  const { rows: [result] } = await sql<{ items: string; more: boolean; last_id: string | null }>`
    select coalesce(json_agg(${item} order by n.rn) filter (where n.rn <= ${page.limit}), '[]')::text as items,
           count(*) > ${page.limit} as more,
           min(n.id) filter (where n.rn <= ${page.limit}) as last_id
    from (select q.*, row_number() over (order by q.id desc) as rn from ${rows.as('q')}) as n`.execute(db);
  if (!result) throw new Error('an aggregate returned no row');
  return { itemsJson: result.items, nextCursor: result.more && result.last_id !== null ? encodeCursor(result.last_id) : null };
}

/** Milliseconds since the epoch of a timestamptz column of `n`, as the presenters' `getTime()`. */
export const epochMs = (column: string) => sql`floor(extract(epoch from ${sql.ref(`n.${column}`)}) * 1000)::bigint`;
