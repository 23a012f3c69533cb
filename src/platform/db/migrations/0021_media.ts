import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Generated media as outputs: what made an output (`origin`: every earlier output came from an
 * automation), the call that made it (`generation_id`), its prompt, model, connection, project and
 * input file. The usage ledger records what media calls are priced by (`unit`, `units`: images,
 * seconds of audio, characters), beside tokens.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table outputs add column origin text not null default 'automation'`.execute(db);
  await sql`alter table outputs add column generation_id text`.execute(db);
  await sql`alter table outputs add column project_id text`.execute(db);
  await sql`alter table outputs add column prompt text`.execute(db);
  await sql`alter table outputs add column model text`.execute(db);
  await sql`alter table outputs add column connection_id text`.execute(db);
  await sql`alter table outputs add column source_file_id text`.execute(db);
  await sql`alter table usage_records add column unit text`.execute(db);
  await sql`alter table usage_records add column units bigint`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table usage_records drop column units`.execute(db);
  await sql`alter table usage_records drop column unit`.execute(db);
  for (const column of ['source_file_id', 'connection_id', 'model', 'prompt', 'project_id', 'generation_id', 'origin']) {
    await sql`alter table outputs drop column ${sql.ref(column)}`.execute(db);
  }
}
