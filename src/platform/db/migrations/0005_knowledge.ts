import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  // Full-text vectors kept up to date by Postgres itself, with GIN indexes.
  await sql`alter table notes add column tsv tsvector generated always as
    (to_tsvector('english', coalesce(title, '') || ' ' || coalesce(content, ''))) stored`.execute(db);
  await sql`alter table memory_items add column tsv tsvector generated always as
    (to_tsvector('english', content)) stored`.execute(db);
  await sql`alter table projects add column tsv tsvector generated always as
    (to_tsvector('english', name || ' ' || description || ' ' || instructions)) stored`.execute(db);
  for (const table of ['notes', 'memory_items', 'projects']) {
    await sql`create index ${sql.id(`${table}_tsv_idx`)} on ${sql.table(table)} using gin (tsv)`.execute(db);
  }

  // Embeddings only where the database has pgvector (the embedded PGlite does).
  const vector = await sql<{ installed: boolean }>`
    select exists (select 1 from pg_extension where extname = 'vector') as installed`.execute(db);
  if (!vector.rows[0]?.installed) return;
  await sql`
    create table knowledge_embeddings (
      source_kind text not null,
      source_id text not null,
      owner_user_id text not null,
      source_version text not null,
      embedding vector(256) not null,
      created_at timestamptz not null default now(),
      primary key (source_kind, source_id)
    )`.execute(db);
  await sql`create index knowledge_embeddings_owner_idx on knowledge_embeddings (owner_user_id)`.execute(db);
  await sql`create index knowledge_embeddings_hnsw_idx on knowledge_embeddings using hnsw (embedding vector_cosine_ops)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists knowledge_embeddings`.execute(db);
  for (const table of ['notes', 'memory_items', 'projects']) {
    await sql`alter table ${sql.table(table)} drop column if exists tsv`.execute(db);
  }
}
