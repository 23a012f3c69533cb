import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  // A reply being generated is held by its instance until `locked_until` (renewed while it
  // streams); after that any instance fails it as interrupted.
  await sql`alter table messages add column locked_until timestamptz`.execute(db);
  // Replies left generating before leases existed: expired once the longest chat timeout (10 min)
  // has passed since their last change, so a reply still streaming on an older instance is spared.
  await sql`update messages set locked_until = updated_at + interval '10 minutes' where status = 'generating'`.execute(db);
  await sql`create index messages_generating_lease_idx on messages (locked_until) where status = 'generating'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists messages_generating_lease_idx`.execute(db);
  await sql`alter table messages drop column locked_until`.execute(db);
}
