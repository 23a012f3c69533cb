import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Feedback on assistant replies (one per user and message, changeable), temporary conversations
 * (not listed, deleted some time after their last activity), and the setting that turns off
 * model-written conversation titles (null: the default, on).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('message_feedback')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('message_id', 'text', (c) => c.notNull().references('messages.id').onDelete('cascade'))
    .addColumn('conversation_id', 'text', (c) => c.notNull().references('conversations.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('rating', 'text', (c) => c.notNull().check(sql`rating in ('up', 'down')`))
    .addColumn('reason', 'text')
    .addColumn('comment', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();
  // One feedback per user and message: a second one changes the first.
  await db.schema.createIndex('message_feedback_one_idx').on('message_feedback').columns(['message_id', 'user_id']).unique().execute();
  // The administrators' list, newest first, optionally of one rating.
  await db.schema.createIndex('message_feedback_rating_idx').on('message_feedback').columns(['rating', 'id']).execute();
  await db.schema.createIndex('message_feedback_conversation_idx').on('message_feedback').column('conversation_id').execute();

  await db.schema
    .alterTable('conversations')
    .addColumn('temporary', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
  // The sweep of temporary conversations past their time to live, by last activity.
  await sql`create index conversations_temporary_idx on conversations (updated_at) where temporary`.execute(db);

  await db.schema.alterTable('user_settings').addColumn('auto_titles', 'boolean').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('user_settings').dropColumn('auto_titles').execute();
  await db.schema.dropIndex('conversations_temporary_idx').ifExists().execute();
  await db.schema.alterTable('conversations').dropColumn('temporary').execute();
  await db.schema.dropTable('message_feedback').ifExists().execute();
}
