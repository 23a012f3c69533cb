import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('agent_environments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('platform', 'text', (c) => c.notNull().check(sql`platform in ('linux', 'macos', 'windows')`))
    .addColumn('protocol_version', 'integer', (c) => c.notNull())
    // SHA-256 of the credential; the credential itself is shown once and never stored.
    .addColumn('credential_hash', 'text', (c) => c.notNull())
    .addColumn('agent_version', 'text')
    .addColumn('reported_status', 'text')
    .addColumn('last_heartbeat_at', 'timestamptz')
    .addColumn('filesystem_grant', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('agent_environments_owner_id_idx').on('agent_environments').columns(['owner_user_id', 'id']).execute();

  await db.schema
    .createTable('agent_commands')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('environment_id', 'text', (c) => c.notNull().references('agent_environments.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('queued', 'claimed', 'accepted', 'rejected', 'expired')`))
    .addColumn('deliveries', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('lease_expires_at', 'timestamptz')
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('error_code', 'text')
    .addColumn('error_message', 'text')
    .addColumn('acknowledged_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('agent_commands_environment_id_idx').on('agent_commands').columns(['environment_id', 'id']).execute();
  await sql`create index agent_commands_waiting_idx on agent_commands (environment_id, id) where status in ('queued', 'claimed')`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('agent_commands').ifExists().execute();
  await db.schema.dropTable('agent_environments').ifExists().execute();
}
