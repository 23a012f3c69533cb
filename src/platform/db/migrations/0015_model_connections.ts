import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Users' own model provider connections (bring your own key), the deployment's model policy, and
 * the connection a usage record was made through (usage on a user's own key is recorded, not
 * charged).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('model_connections')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('openai', 'anthropic', 'google', 'openai_compatible')`))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('base_url', 'text')
    // The API key, sealed with the deployment's secrets key (never stored or logged in clear).
    .addColumn('api_key', 'text')
    .addColumn('enabled_models', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    // The provider's models as its list last named them: [{ id, contextWindow }].
    .addColumn('models', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('status', 'text', (c) =>
      c
        .notNull()
        .defaultTo('untested')
        .check(sql`status in ('untested', 'active', 'error')`),
    )
    .addColumn('last_error', 'text')
    .addColumn('last_tested_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('model_connections_owner_id_idx').on('model_connections').columns(['owner_user_id', 'id']).execute();

  // One row (id = 'default'): the allow list (null: every model not blocked) and the block list.
  await db.schema
    .createTable('model_policy')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('allow', 'jsonb')
    .addColumn('block', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('updated_by', 'text')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  // No foreign key: the record keeps naming a connection after it is deleted.
  await db.schema.alterTable('usage_records').addColumn('connection_id', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('usage_records').dropColumn('connection_id').execute();
  await db.schema.dropTable('model_policy').ifExists().execute();
  await db.schema.dropTable('model_connections').ifExists().execute();
}
