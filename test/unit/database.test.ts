import { sql } from 'kysely';
import { openPostgres, rowsOf } from '../../src/platform/db';
import { migrateToLatest } from '../../src/platform/db/migrate';
import { epochMs, epochMsOrNull, millis } from '../../src/platform/db/timestamps';
import { type Harness, startHarness } from '../helpers/harness';

/** The tests that need a Postgres server (DATABASE_URL); skipped on the embedded PGlite. */
const onPostgres = process.env.TEST_DATABASE_URL ? test : test.skip;
/** The tests of the embedded PGlite; skipped on a Postgres server. */
const onPglite = process.env.TEST_DATABASE_URL ? test.skip : test;

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.close());

describe('the database', () => {
  test('is migrated to the latest migration', async () => {
    const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(h.runtime.database.db);
    expect(rows.rows.map((r) => r.name)).toEqual(['0001_initial', '0002_idempotency_keys', '0003_administration', '0004_files', '0005_knowledge', '0006_webhooks', '0007_conversations', '0008_automations', '0009_billing', '0010_agent_environments', '0011_rate_limits', '0012_rate_limit_grants', '0013_reply_leases', '0014_embedding_models', '0015_model_connections', '0016_settings_onboarding', '0017_embeddings_model_setting', '0018_tools_approvals', '0019_mcp_servers', '0020_message_citations', '0021_media', '0022_integrations', '0023_integration_refresh_lease']);
  });

  test('an up-to-date database is left alone; one with a migration this version does not know is refused', async () => {
    const db = h.runtime.database.db;
    expect(await migrateToLatest(db)).toEqual([]);
    await sql`insert into kysely_migration (name, timestamp) values ('9999_from_a_newer_version', now()::text)`.execute(db);
    try {
      await expect(migrateToLatest(db)).rejects.toThrow(/9999_from_a_newer_version/);
    } finally {
      await sql`delete from kysely_migration where name = '9999_from_a_newer_version'`.execute(db);
    }
    expect(await migrateToLatest(db)).toEqual([]);
  });

  test('has pgvector wherever the server offers it (always on the embedded PGlite)', async () => {
    const { rows } = await sql<{ available: boolean; installed: boolean }>`
      select exists (select 1 from pg_available_extensions where name = 'vector') as available,
             exists (select 1 from pg_extension where extname = 'vector') as installed`.execute(h.runtime.database.db);
    expect(rows[0]!.installed).toBe(rows[0]!.available);
    if (h.runtime.database.kind === 'pglite') expect(rows[0]!.installed).toBe(true);
  });

  test('a timestamp read as epoch milliseconds (lists) is the one its Date gives (a record read alone)', async () => {
    const db = h.runtime.database.db;
    const texts = [
      '2026-11-26 11:49:40.123987+00',
      '2026-11-26 11:49:40.9999995+05:30',
      '1969-12-31 23:59:59.9995+00',
      '1000-01-01 00:00:00.001-03:00',
      '9999-12-31 23:59:59.999999+00',
      '2026-03-29 01:30:00+00',
    ];
    for (const text of texts) {
      const row = await db
        .selectFrom(sql<{ at: Date; listed: Date; missing: Date | null }>`(select ${text}::timestamptz as at, ${text}::timestamptz as listed, null::timestamptz as missing)`.as('t'))
        .select(['at', epochMs('listed'), epochMsOrNull('missing')])
        .executeTakeFirstOrThrow();
      expect(typeof row.listed).toBe('number');
      expect(row.listed).toBe(millis(row.at));
      expect(row.missing).toBeNull();
    }
  });

  onPglite('the embedded PGlite keeps a 16 MB buffer cache, not Postgres’s 128 MB (its idle memory)', async () => {
    expect(h.runtime.database.kind).toBe('pglite');
    const { rows } = await sql<{ shared_buffers: string }>`show shared_buffers`.execute(h.runtime.database.db);
    expect(rows[0]!.shared_buffers).toBe('16MB');
  });
});

describe('prepared statements (Postgres)', () => {
  /** The named statements of the instance's one connection, after listing notes twice. */
  async function preparedAfterListing(env: Record<string, string>): Promise<{ harness: Harness; statements: string[] }> {
    const harness = await startHarness({ DATABASE_POOL_SIZE: '1', ...env });
    const user = await harness.newUser();
    await harness.http().post('/api/v1/notes').set(user.auth).send({ title: 'Prepared' }).expect(200);
    for (let i = 0; i < 2; i += 1) {
      const res = await harness.http().get('/api/v1/notes?limit=5').set(user.auth).expect(200);
      expect(res.body.notes.map((n: { title: string }) => n.title)).toEqual(['Prepared']);
    }
    const { rows } = await sql<{ name: string; statement: string }>`select name, statement from pg_prepared_statements`.execute(harness.runtime.database.db);
    return { harness, statements: rows.map((r) => `${r.name}: ${r.statement}`) };
  }

  onPostgres('data statements are prepared once per connection, and prepared again after a migration changes the table', async () => {
    const { harness, statements } = await preparedAfterListing({});
    try {
      const list = statements.filter((s) => /^aiws_\d+: select "id", .* from "notes" where "owner_user_id" = \$1 order by "id" desc limit \$2$/.test(s));
      expect(list).toHaveLength(1);
      // Only data statements are named: never begin, commit or set.
      expect(statements.filter((s) => !/^aiws_\d+: \s*(select|insert|update|delete|with)\b/i.test(s))).toEqual([]);
      const user = await harness.newUser();
      const created = await harness.http().post('/api/v1/notes').set(user.auth).send({ title: 'Before' }).expect(200);
      const one = () => harness.http().get('/api/v1/notes').query({ noteId: created.body.note.noteId }).set(user.auth).expect(200);
      await one();
      // A `select *` prepared before the table changed fails once with a stale plan, and is prepared again.
      await sql`alter table notes add column added_later text`.execute(harness.runtime.database.db);
      expect((await one()).body.note.title).toBe('Before');
      const res = await harness.http().get('/api/v1/notes').set(user.auth).expect(200);
      expect(res.body.notes.map((n: { title: string }) => n.title)).toEqual(['Before']);
    } finally {
      await harness.close();
    }
  });

  onPostgres('statements inside a transaction run unnamed (a stale plan could not be retried there)', async () => {
    const database = await openPostgres(process.env.TEST_DATABASE_URL as string, 1, { preparedStatements: true });
    try {
      const marker = `inside_${Date.now()}`;
      await database.db.transaction().execute((trx) => sql`select ${marker}::text as inside`.execute(trx));
      await sql`select ${marker}::text as outside`.execute(database.db);
      const { rows } = await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(database.db);
      const statements = rows.map((r) => r.statement);
      expect(statements.some((s) => s.includes('as outside'))).toBe(true);
      expect(statements.some((s) => s.includes('as inside'))).toBe(false);
    } finally {
      await database.close();
    }
  });

  onPostgres('DATABASE_PREPARED_STATEMENTS=false runs every statement unnamed (for a transaction-mode pooler)', async () => {
    const { harness, statements } = await preparedAfterListing({ DATABASE_PREPARED_STATEMENTS: 'false' });
    await harness.close();
    expect(statements).toEqual([]);
  });
});

describe('the pool’s client (Postgres)', () => {
  onPostgres('answers Kysely’s queries, prepared or not, with their rows, and refuses with Postgres’s error and code', async () => {
    for (const preparedStatements of [true, false]) {
      const database = await openPostgres(process.env.TEST_DATABASE_URL as string, 1, { preparedStatements });
      try {
        const { rows } = await sql<{ n: number; s: string }>`select ${40}::int + 2 as n, ${'text'} as s`.execute(database.db);
        expect(rows).toEqual([{ n: 42, s: 'text' }]);
        const failed = sql`select 1 / ${0}::int`.execute(database.db);
        await expect(failed).rejects.toMatchObject({ code: '22012', message: 'division by zero' });
        // The pool's one connection is still usable, inside and outside a transaction.
        const inside = await database.db.transaction().execute(async (trx) => (await sql<{ n: number }>`select 1 as n`.execute(trx)).rows);
        expect(inside).toEqual([{ n: 1 }]);
        expect((await sql<{ n: number }>`select 2 as n`.execute(database.db)).rows).toEqual([{ n: 2 }]);
      } finally {
        await database.close();
      }
    }
  });

  onPostgres('runs a compiled query (rowsOf) on the pool outside a transaction, and on the transaction’s connection inside one', async () => {
    const database = await openPostgres(process.env.TEST_DATABASE_URL as string, 2, { preparedStatements: true });
    const { db } = database;
    try {
      expect(await rowsOf(db, sql<{ n: number }>`select ${40}::int + 2 as n`.compile(db))).toEqual([{ n: 42 }]);
      await expect(rowsOf(db, sql`select 1 / ${0}::int`.compile(db))).rejects.toMatchObject({ code: '22012' });
      // The client went back to the pool after the error: both of its connections still answer.
      const both = await Promise.all([1, 2].map((n) => rowsOf(db, sql<{ n: number }>`select ${n}::int as n, pg_sleep(0.05)::text as slept`.compile(db))));
      expect(both.map((rows) => rows[0]?.n)).toEqual([1, 2]);
      expect(database.poolStats()).toMatchObject({ total: 2, idle: 2, waiting: 0 });
      // A temporary table exists only on the connection that made it: the transaction's.
      const inside = await db.transaction().execute(async (trx) => {
        await sql`create temporary table only_here (n int) on commit drop`.execute(trx);
        await sql`insert into only_here values (7)`.execute(trx);
        return rowsOf(trx, sql<{ n: number }>`select n from only_here`.compile(trx));
      });
      expect(inside).toEqual([{ n: 7 }]);
    } finally {
      await database.close();
    }
  });
});
