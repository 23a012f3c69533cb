import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Skills become assistants: the model they answer with (null: the conversation's or the default),
 * the tools they offer with a policy each, the knowledge they are grounded in (null: all the
 * chatting user may read) and the prompts a client offers to start with.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('skills')
    .addColumn('model', 'text')
    .addColumn('tools', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('knowledge_scope', 'jsonb')
    .addColumn('starter_prompts', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('skills')
    .dropColumn('model')
    .dropColumn('tools')
    .dropColumn('knowledge_scope')
    .dropColumn('starter_prompts')
    .execute();
}
