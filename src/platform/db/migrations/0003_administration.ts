import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('administrative_principals')
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull().check(sql`role in ('admin', 'auditor', 'billing_admin', 'support')`))
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('granted_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('administrative_principals_pk', ['user_id', 'role'])
    .execute();
  await db.schema.createIndex('administrative_principals_role_idx').on('administrative_principals').column('role').execute();

  await db.schema
    .createTable('audit_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('actor_user_id', 'text', (c) => c.notNull())
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('resource_id', 'text')
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text')
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('audit_events_action_idx').on('audit_events').columns(['action', 'id']).execute();
  await db.schema.createIndex('audit_events_actor_idx').on('audit_events').columns(['actor_user_id', 'id']).execute();
  await db.schema.createIndex('audit_events_resource_type_idx').on('audit_events').columns(['resource_type', 'id']).execute();
  // The log is append-only: no route changes it, and the database refuses it too.
  await sql`
    create function audit_events_append_only() returns trigger language plpgsql as $$
    begin
      raise exception 'audit events cannot be changed or deleted';
    end $$`.execute(db);
  await sql`
    create trigger audit_events_append_only before update or delete on audit_events
    for each row execute function audit_events_append_only()`.execute(db);

  await db.schema
    .createTable('budgets')
    .addColumn('user_id', 'text', (c) => c.primaryKey())
    .addColumn('balance_cents', 'bigint', (c) => c.notNull().check(sql`balance_cents >= 0`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('ledger_entries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('amount_cents', 'bigint', (c) => c.notNull())
    .addColumn('balance_after_cents', 'bigint', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('actor_user_id', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('ledger_entries_user_idx').on('ledger_entries').columns(['user_id', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('ledger_entries').ifExists().execute();
  await db.schema.dropTable('budgets').ifExists().execute();
  await sql`drop trigger if exists audit_events_append_only on audit_events`.execute(db);
  await db.schema.dropTable('audit_events').ifExists().execute();
  await sql`drop function if exists audit_events_append_only()`.execute(db);
  await db.schema.dropTable('administrative_principals').ifExists().execute();
}
