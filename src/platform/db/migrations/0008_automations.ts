import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('automations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('prompt', 'text', (c) => c.notNull())
    .addColumn('cron', 'text')
    .addColumn('timezone', 'text')
    .addColumn('enabled', 'boolean', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.references('projects.id').onDelete('set null'))
    .addColumn('skill_ids', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('model', 'text')
    .addColumn('output_format', 'text', (c) => c.notNull().check(sql`output_format in ('markdown', 'text', 'json')`))
    // The next slot of the schedule not yet claimed; null without a schedule.
    .addColumn('next_run_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addCheckConstraint('automations_schedule_whole', sql`(cron is null) = (timezone is null)`)
    .execute();
  await db.schema.createIndex('automations_owner_id_idx').on('automations').columns(['owner_user_id', 'id']).execute();
  await sql`create index automations_due_idx on automations (next_run_at) where enabled and cron is not null`.execute(db);

  await db.schema
    .createTable('automation_runs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('automation_id', 'text', (c) => c.notNull().references('automations.id').onDelete('cascade'))
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('queued', 'running', 'succeeded', 'failed', 'cancelled')`))
    .addColumn('trigger', 'text', (c) => c.notNull().check(sql`trigger in ('schedule', 'manual')`))
    // A scheduled slot is claimed by inserting its run: the unique key makes each slot run once.
    .addColumn('scheduled_for', 'timestamptz')
    .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('locked_until', 'timestamptz')
    .addColumn('lease_token', 'text')
    .addColumn('error_code', 'text')
    .addColumn('error_message', 'text')
    .addColumn('input_tokens', 'integer')
    .addColumn('output_tokens', 'integer')
    .addColumn('cost_micro_cents', 'bigint')
    .addColumn('output_ids', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .addUniqueConstraint('automation_runs_slot_key', ['automation_id', 'scheduled_for'])
    .execute();
  await sql`create index automation_runs_open_idx on automation_runs (created_at) where status in ('queued', 'running')`.execute(db);
  await db.schema.createIndex('automation_runs_owner_id_idx').on('automation_runs').columns(['owner_user_id', 'id']).execute();
  await db.schema.createIndex('automation_runs_automation_id_idx').on('automation_runs').columns(['automation_id', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('automation_runs').ifExists().execute();
  await db.schema.dropTable('automations').ifExists().execute();
}
