import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * The files a user message came with (chat attachments), as a JSON array of their descriptions
 * (fileId, name, contentType, sizeBytes, kind, and an image's width and height); every other
 * message, and every message written before, has none.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table messages add column attachments jsonb not null default '[]'::jsonb`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table messages drop column attachments`.execute(db);
}
