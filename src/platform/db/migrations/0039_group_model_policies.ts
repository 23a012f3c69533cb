import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  // A group's model policy, on top of the deployment's (`model_policy`): the allow list (null:
  // every model not blocked) and the block list. Deleting the group deletes its policy.
  await db.schema
    .createTable('group_model_policies')
    .addColumn('group_id', 'text', (c) => c.primaryKey().references('groups.id').onDelete('cascade'))
    .addColumn('allow', 'jsonb')
    .addColumn('block', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('updated_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  // What the groups claim of a user's token carried when their memberships were last matched to
  // it (a hash of the sorted names), so that an unchanged claim writes nothing.
  await db.schema
    .createTable('group_claim_syncs')
    .addColumn('user_id', 'text', (c) => c.primaryKey())
    .addColumn('claim_hash', 'text', (c) => c.notNull())
    .addColumn('synced_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  // A deleted connection takes its grants with it, as files, projects and skills do (0035).
  await sql`create trigger model_connections_forget_grants after delete on model_connections
            for each row execute function access_grants_forget_resource('connection')`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger model_connections_forget_grants on model_connections`.execute(db);
  await db.schema.dropTable('group_claim_syncs').execute();
  await db.schema.dropTable('group_model_policies').execute();
}
