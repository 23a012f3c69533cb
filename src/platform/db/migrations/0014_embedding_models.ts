import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Embeddings of any size, each tagged with the model that made it. The column loses its fixed
 * vector(256) type (a model such as nomic-embed-text returns 768). pgvector builds HNSW only over a
 * fixed size, so the index becomes an expression index over the 256-dimension rows (the default
 * size, as pgvector documents for mixed sizes); other sizes are searched exactly, by owner and
 * model. Rows written before carry no model and are re-embedded by the background indexer.
 */
export async function up(db: Kysely<any>): Promise<void> {
  const table = await sql<{ present: boolean }>`select to_regclass('knowledge_embeddings') is not null as present`.execute(db);
  if (!table.rows[0]?.present) return;
  await sql`drop index if exists knowledge_embeddings_hnsw_idx`.execute(db);
  await sql`alter table knowledge_embeddings alter column embedding type vector`.execute(db);
  await sql`alter table knowledge_embeddings add column embedding_model text not null default ''`.execute(db);
  await sql`drop index if exists knowledge_embeddings_owner_idx`.execute(db);
  await sql`create index knowledge_embeddings_owner_model_idx on knowledge_embeddings (owner_user_id, embedding_model)`.execute(db);
  await sql`create index knowledge_embeddings_hnsw_256_idx on knowledge_embeddings
            using hnsw ((embedding::vector(256)) vector_cosine_ops) where vector_dims(embedding) = 256`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  const table = await sql<{ present: boolean }>`select to_regclass('knowledge_embeddings') is not null as present`.execute(db);
  if (!table.rows[0]?.present) return;
  // Vectors of another size cannot go back into vector(256): they are dropped and embedded again.
  await sql`delete from knowledge_embeddings where vector_dims(embedding) <> 256`.execute(db);
  await sql`drop index if exists knowledge_embeddings_owner_model_idx`.execute(db);
  await sql`drop index if exists knowledge_embeddings_hnsw_256_idx`.execute(db);
  await sql`alter table knowledge_embeddings drop column embedding_model`.execute(db);
  await sql`alter table knowledge_embeddings alter column embedding type vector(256)`.execute(db);
  await sql`create index knowledge_embeddings_owner_idx on knowledge_embeddings (owner_user_id)`.execute(db);
  await sql`create index knowledge_embeddings_hnsw_idx on knowledge_embeddings using hnsw (embedding vector_cosine_ops)`.execute(db);
}
