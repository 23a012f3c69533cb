import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  const vector = await sql<{ available: boolean }>`
    select exists (select 1 from pg_available_extensions where name = 'vector') as available`.execute(db);
  if (vector.rows[0]?.available) await sql`create extension if not exists vector`.execute(db);

  await db.schema
    .createTable('capabilities')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('enabled', 'boolean', (c) => c.notNull())
    .addColumn('updated_by', 'text')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('sessions')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_seen_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('ended_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('sessions_user_idx').on('sessions').column('user_id').execute();

  await db.schema
    .createTable('projects')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('instructions', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('color', 'text')
    .addColumn('parent_id', 'text', (c) => c.references('projects.id').onDelete('restrict'))
    .addColumn('client_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('projects_owner_id_idx').on('projects').columns(['owner_user_id', 'id']).execute();
  await db.schema.createIndex('projects_parent_idx').on('projects').column('parent_id').execute();
  await db.schema
    .createIndex('projects_owner_client_uq')
    .on('projects')
    .columns(['owner_user_id', 'client_id'])
    .unique()
    .where(sql.ref('client_id'), 'is not', null)
    .execute();

  await db.schema
    .createTable('notes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.references('projects.id').onDelete('set null'))
    .addColumn('title', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('content', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('pinned', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('notes_owner_id_idx').on('notes').columns(['owner_user_id', 'id']).execute();
  await db.schema.createIndex('notes_project_idx').on('notes').column('project_id').execute();

  await db.schema
    .createTable('memory_items')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.references('projects.id').onDelete('set null'))
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('fact', 'preference')`))
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('content_key', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('source_ref', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('memory_items_owner_content_uq', ['owner_user_id', 'content_key'])
    .execute();
  await db.schema.createIndex('memory_items_owner_id_idx').on('memory_items').columns(['owner_user_id', 'id']).execute();
  await db.schema.createIndex('memory_items_project_idx').on('memory_items').column('project_id').execute();

  await db.schema
    .createTable('skills')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.references('projects.id').onDelete('set null'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('instructions', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('skills_owner_id_idx').on('skills').columns(['owner_user_id', 'id']).execute();
  await db.schema.createIndex('skills_project_idx').on('skills').column('project_id').execute();
  await sql`create unique index skills_owner_name_uq on skills (owner_user_id, lower(name))`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['skills', 'memory_items', 'notes', 'projects', 'sessions', 'capabilities']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
