import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('skills')
    .addColumn('greeting', 'text', (c) => c.notNull().defaultTo(''))
    .execute();

  await db.schema
    .createTable('conversations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.references('projects.id').onDelete('set null'))
    .addColumn('title', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('archived', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('model', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('conversations_owner_id_idx').on('conversations').columns(['owner_user_id', 'id']).execute();
  await db.schema.createIndex('conversations_project_idx').on('conversations').column('project_id').execute();

  await db.schema
    .createTable('messages')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('conversation_id', 'text', (c) => c.notNull().references('conversations.id').onDelete('cascade'))
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull().check(sql`role in ('user', 'assistant')`))
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('message', 'reply', 'greeting')`))
    .addColumn('content', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('generating', 'complete', 'failed')`))
    .addColumn('agent_id', 'text')
    .addColumn('model', 'text')
    .addColumn('error_code', 'text')
    .addColumn('error_message', 'text')
    .addColumn('input_tokens', 'integer')
    .addColumn('output_tokens', 'integer')
    // Cost in millionths of a cent: tokens × cents per million tokens, exactly.
    .addColumn('cost_micro_cents', 'bigint')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('messages_conversation_id_idx').on('messages').columns(['conversation_id', 'id']).execute();
  // One greeting per agent and conversation.
  await sql`create unique index messages_one_greeting_idx on messages (conversation_id, agent_id) where kind = 'greeting'`.execute(db);

  // The usage ledger: what each charged action consumed (billing charges budgets from it).
  await db.schema
    .createTable('usage_records')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('input_tokens', 'integer', (c) => c.notNull())
    .addColumn('output_tokens', 'integer', (c) => c.notNull())
    .addColumn('cost_micro_cents', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('usage_records_user_idx').on('usage_records').columns(['user_id', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['usage_records', 'messages', 'conversations']) await db.schema.dropTable(table).ifExists().execute();
  await db.schema.alterTable('skills').dropColumn('greeting').execute();
}
