import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  // The shape rate-limiter-flexible's Postgres store reads and writes (points per key and window).
  await sql`create table rate_limits (key varchar(255) primary key, points integer not null default 0, expire bigint)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('rate_limits').ifExists().execute();
}
