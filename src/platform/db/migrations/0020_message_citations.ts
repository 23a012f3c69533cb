import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * The sources a grounded chat reply was given (knowledge-grounded chat), as a JSON array of
 * citations; every other message, and every message written before, has none.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table messages add column citations jsonb not null default '[]'::jsonb`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table messages drop column citations`.execute(db);
}
