import type { Kysely } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  // A charge is recorded once per (kind, resource): a write repeated after a lost connection finds its record.
  await db.schema.createIndex('usage_records_resource_idx').on('usage_records').columns(['kind', 'resource_id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('usage_records_resource_idx').ifExists().execute();
}
