import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Stopping a reply from any instance and resuming its stream: the `stopped` status, the time a
 * stop was asked for (read by the reply's instance with its lease renewal, when the notification
 * was missed), and the reply's stored stream events, replayed to clients that attach later.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table messages drop constraint if exists messages_status_check`.execute(db);
  await sql`alter table messages add constraint messages_status_check check (status in ('generating', 'awaiting_approval', 'complete', 'failed', 'stopped'))`.execute(
    db,
  );
  await sql`alter table messages add column stop_requested_at timestamptz`.execute(db);

  // One row per stored event (consecutive deltas written together are one row): `seq` is the SSE
  // id of the last event the row holds, `first_seq` of its first.
  await db.schema
    .createTable('reply_events')
    .addColumn('message_id', 'text', (c) => c.notNull().references('messages.id').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('first_seq', 'integer', (c) => c.notNull())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('data', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('reply_events_pkey', ['message_id', 'seq'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('reply_events').execute();
  await sql`alter table messages drop column stop_requested_at`.execute(db);
  await sql`update messages set status = 'failed', error_code = 'cancelled' where status = 'stopped'`.execute(db);
  await sql`alter table messages drop constraint if exists messages_status_check`.execute(db);
  await sql`alter table messages add constraint messages_status_check check (status in ('generating', 'awaiting_approval', 'complete', 'failed'))`.execute(
    db,
  );
}
