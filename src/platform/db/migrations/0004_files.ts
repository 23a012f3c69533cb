import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('files')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('file', 'folder')`))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('mime_type', 'text')
    .addColumn('size_bytes', 'bigint')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('sha256', 'text')
    .addColumn('storage_key', 'text')
    .addColumn('project_id', 'text', (c) => c.references('projects.id').onDelete('set null'))
    .addColumn('parent_id', 'text', (c) => c.references('files.id').onDelete('restrict'))
    .addColumn('conversation_id', 'text')
    .addColumn('ingest_status', 'text', (c) => c.notNull().defaultTo('none'))
    .addColumn('ingest_progress', 'real', (c) => c.notNull().defaultTo(0))
    .addColumn('ingest_error', 'text')
    .addColumn('chunk_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('chunk_generation', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('files_owner_id_idx').on('files').columns(['owner_user_id', 'id']).execute();
  await db.schema.createIndex('files_parent_idx').on('files').column('parent_id').execute();
  await db.schema.createIndex('files_project_idx').on('files').column('project_id').execute();

  await db.schema
    .createTable('file_shares')
    .addColumn('file_id', 'text', (c) => c.notNull().references('files.id').onDelete('cascade'))
    .addColumn('grantee_user_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('file_shares_pk', ['file_id', 'grantee_user_id'])
    .execute();
  await db.schema.createIndex('file_shares_grantee_idx').on('file_shares').columns(['grantee_user_id', 'file_id']).execute();

  await db.schema
    .createTable('upload_tokens')
    .addColumn('jti', 'text', (c) => c.primaryKey())
    .addColumn('file_id', 'text', (c) => c.notNull().references('files.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('used_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('upload_tokens_file_idx').on('upload_tokens').column('file_id').execute();

  await db.schema
    .createTable('file_chunks')
    .addColumn('file_id', 'text', (c) => c.notNull().references('files.id').onDelete('cascade'))
    .addColumn('generation', 'integer', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('start_offset', 'integer', (c) => c.notNull())
    .addColumn('end_offset', 'integer', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('tsv', sql`tsvector`, (c) => c.generatedAlwaysAs(sql`to_tsvector('english', content)`).stored())
    .addPrimaryKeyConstraint('file_chunks_pk', ['file_id', 'generation', 'seq'])
    .execute();
  await sql`create index file_chunks_tsv_idx on file_chunks using gin (tsv)`.execute(db);

  await db.schema
    .createTable('outputs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('mime_type', 'text', (c) => c.notNull())
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('storage_key', 'text', (c) => c.notNull())
    .addColumn('conversation_id', 'text')
    .addColumn('automation_id', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('outputs_owner_id_idx').on('outputs').columns(['owner_user_id', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['outputs', 'file_chunks', 'upload_tokens', 'file_shares', 'files']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
