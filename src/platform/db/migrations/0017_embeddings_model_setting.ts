import type { Kysely } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * A user's chosen embeddings model (`<connectionId>/<provider's model id>`, one of their own
 * connections'); null: the deployment's embedder. The knowledge indexer reads it beside each
 * record's owner to know which embedder that user's records are due from.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('user_settings').addColumn('default_embeddings_model', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('user_settings').dropColumn('default_embeddings_model').execute();
}
