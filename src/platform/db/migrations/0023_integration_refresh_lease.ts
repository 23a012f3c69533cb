import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * A refresh of a connection's tokens is held by one request (any instance) until
 * `refreshing_until`: the others wait for its tokens rather than spend the same refresh token
 * (which a rotating provider accepts once). Null: no refresh under way.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table integration_connections add column refreshing_until timestamptz`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table integration_connections drop column refreshing_until`.execute(db);
}
