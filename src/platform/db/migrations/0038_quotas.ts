import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  // A spending limit per period: a group's (every member's spend counts), a model's across the
  // deployment, or a model's within a group. At least one of group_id and model is set.
  await db.schema
    .createTable('quotas')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('group_id', 'text', (c) => c.references('groups.id').onDelete('cascade'))
    .addColumn('model', 'text')
    .addColumn('period', 'text', (c) => c.notNull().check(sql`period in ('day', 'month')`))
    .addColumn('limit_cents', 'bigint', (c) => c.notNull().check(sql`limit_cents >= 0`))
    .addColumn('threshold_percent', 'integer', (c) => c.check(sql`threshold_percent between 1 and 99`))
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addCheckConstraint('quotas_scope_check', sql`group_id is not null or model is not null`)
    .execute();
  await db.schema.createIndex('quotas_group_idx').on('quotas').columns(['group_id']).execute();
  await db.schema.createIndex('quotas_model_idx').on('quotas').columns(['model']).execute();

  // What a quota's period has spent (millionths of a cent), and when its soft threshold was
  // reached in it (the event is sent once per quota and period). Locked while a call reserves.
  await db.schema
    .createTable('quota_usage')
    .addColumn('quota_id', 'text', (c) => c.notNull().references('quotas.id').onDelete('cascade'))
    .addColumn('period_start', 'timestamptz', (c) => c.notNull())
    .addColumn('spent_micro_cents', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('threshold_reached_at', 'timestamptz')
    .addPrimaryKeyConstraint('quota_usage_pk', ['quota_id', 'period_start'])
    .execute();

  // The upper bound of a call's cost held against a quota while the call runs; replaced by the
  // charge when it ends, deleted when it fails; one left by a crashed instance stops counting at
  // expires_at.
  await db.schema
    .createTable('quota_reservations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('hold_id', 'text', (c) => c.notNull())
    .addColumn('quota_id', 'text', (c) => c.notNull().references('quotas.id').onDelete('cascade'))
    .addColumn('period_start', 'timestamptz', (c) => c.notNull())
    .addColumn('amount_micro_cents', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('quota_reservations_quota_idx').on('quota_reservations').columns(['quota_id', 'period_start']).execute();
  await db.schema.createIndex('quota_reservations_hold_idx').on('quota_reservations').columns(['hold_id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('quota_reservations').execute();
  await db.schema.dropTable('quota_usage').execute();
  await db.schema.dropTable('quotas').execute();
}
