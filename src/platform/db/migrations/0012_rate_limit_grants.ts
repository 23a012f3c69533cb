import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  // How many points the last reservation of a key was given (an instance reserves several at once).
  await sql`alter table rate_limits add column granted integer not null default 0`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table rate_limits drop column granted`.execute(db);
}
