import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Tool calling in chat: a reply's parts (text, tool calls and their results, in order), the
 * `awaiting_approval` status of a reply paused for the user's decision, and the approvals.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table messages add column parts jsonb not null default '[]'::jsonb`.execute(db);
  // How many model calls (steps) a reply has made so far: its usage columns sum them.
  await sql`alter table messages add column model_calls integer not null default 0`.execute(db);
  await sql`alter table messages drop constraint if exists messages_status_check`.execute(db);
  await sql`alter table messages add constraint messages_status_check check (status in ('generating', 'awaiting_approval', 'complete', 'failed'))`.execute(
    db,
  );

  await db.schema
    .createTable('tool_approvals')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('conversation_id', 'text', (c) => c.notNull().references('conversations.id').onDelete('cascade'))
    .addColumn('message_id', 'text', (c) => c.notNull().references('messages.id').onDelete('cascade'))
    .addColumn('tool_call_id', 'text', (c) => c.notNull())
    .addColumn('tool_name', 'text', (c) => c.notNull())
    .addColumn('arguments', 'jsonb', (c) => c.notNull())
    // SHA-256 (hex) of the canonical JSON of `arguments`: what a decision is bound to.
    .addColumn('arguments_digest', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('pending', 'approved', 'denied', 'expired')`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('decided_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('tool_approvals_user_id_idx').on('tool_approvals').columns(['user_id', 'id']).execute();
  await sql`create index tool_approvals_pending_expiry_idx on tool_approvals (expires_at) where status = 'pending'`.execute(db);
  // At most one undecided approval per reply: a paused turn waits on one call at a time.
  await sql`create unique index tool_approvals_one_pending_idx on tool_approvals (message_id) where status = 'pending'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('tool_approvals').execute();
  await sql`update messages set status = 'failed' where status = 'awaiting_approval'`.execute(db);
  await sql`alter table messages drop constraint if exists messages_status_check`.execute(db);
  await sql`alter table messages add constraint messages_status_check check (status in ('generating', 'complete', 'failed'))`.execute(db);
  await sql`alter table messages drop column model_calls`.execute(db);
  await sql`alter table messages drop column parts`.execute(db);
}
