import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Users' preferences and their onboarding marks. A null setting follows the deployment's default
 * (a deployment may change its defaults later); `ui` is the clients' free-form object.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('user_settings')
    .addColumn('user_id', 'text', (c) => c.primaryKey())
    .addColumn('default_chat_model', 'text')
    .addColumn('default_image_model', 'text')
    .addColumn('default_transcription_model', 'text')
    .addColumn('default_speech_model', 'text')
    .addColumn('memory_in_chat', 'boolean')
    .addColumn('knowledge_in_chat', 'boolean')
    .addColumn('tool_approval', 'text')
    .addColumn('locale', 'text')
    .addColumn('time_zone', 'text')
    .addColumn('theme', 'text')
    .addColumn('ui', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();

  // One row per step a user marked complete; resetting deletes it.
  await db.schema
    .createTable('onboarding_steps')
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('step', 'text', (c) => c.notNull())
    .addColumn('completed_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('onboarding_steps_pkey', ['user_id', 'step'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('onboarding_steps').execute();
  await db.schema.dropTable('user_settings').execute();
}
