import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

const TABLES = ['file_chunks', 'notes', 'memory_items', 'projects'];

export async function up(db: Kysely<any>): Promise<void> {
  // Knowledge search ranks a bounded set of the newest matches of a word; the planner reads them by
  // an ordered index scan for a common word and from the GIN bitmap for a rare one, which it tells
  // apart by the column's most common lexemes. The default target keeps about 1,000 of them; 1,000
  // keeps about 10,000, so that a word in 3% of the chunks is not taken for a rare one.
  for (const table of TABLES) {
    await sql`alter table ${sql.table(table)} alter column tsv set statistics 1000`.execute(db);
    await sql`analyze ${sql.table(table)} (tsv)`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of TABLES) await sql`alter table ${sql.table(table)} alter column tsv set statistics -1`.execute(db);
}
