import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  // rate-limiter-flexible's RateLimiterPostgres counts here now, in exactly the table it would
  // create itself (key, points, expire): the reservations' column goes, and so do the rows the
  // old limiter kept (a minute's counts, which held reserved points rather than used ones).
  await sql`alter table rate_limits drop column granted`.execute(db);
  await sql`delete from rate_limits`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table rate_limits add column granted integer not null default 0`.execute(db);
}
