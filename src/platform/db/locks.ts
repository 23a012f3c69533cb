import { sql } from 'kysely';
import type { Database } from './index';

/** Serializes the transactions that take the same `key` until each ends (any instance). */
export async function lockForTransaction(db: Database, key: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${key}))`.execute(db);
}

/**
 * Whether `ancestorId` is `id` itself or above it, following `parent_id` in a self-referencing
 * table (projects, file folders): the check that keeps a tree from becoming a cycle.
 */
export async function isSelfOrAncestor(db: Database, table: 'projects' | 'files', id: string, ancestorId: string): Promise<boolean> {
  const result = await sql<{ found: boolean }>`
    with recursive chain(id, parent_id) as (
      select id, parent_id from ${sql.table(table)} where id = ${id}
      union
      select t.id, t.parent_id from ${sql.table(table)} t join chain c on t.id = c.parent_id
    )
    select exists (select 1 from chain where id = ${ancestorId}) as found`.execute(db);
  return result.rows[0]?.found === true;
}
