import { sql } from 'kysely';
import { isConnectionFailure, openPostgres } from '../../src/platform/db';
import { migrateToLatest } from '../../src/platform/db/migrate';
import { epochMs, epochMsOrNull, millis } from '../../src/platform/db/timestamps';
import { type Harness, startHarness } from '../helpers/harness';
import { eventually } from '../helpers/receiver';

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
    expect(rows.rows.map((r) => r.name)).toEqual([
      '0001_initial',
      '0002_idempotency_keys',
      '0003_administration',
      '0004_files',
      '0005_knowledge',
      '0006_webhooks',
      '0007_conversations',
      '0008_automations',
      '0009_billing',
      '0010_agent_environments',
      '0011_rate_limits',
      '0012_rate_limit_grants',
      '0013_reply_leases',
      '0014_embedding_models',
      '0015_model_connections',
      '0016_settings_onboarding',
      '0017_embeddings_model_setting',
      '0018_tools_approvals',
      '0019_mcp_servers',
      '0020_message_citations',
      '0021_media',
      '0022_integrations',
      '0023_integration_refresh_lease',
      '0024_rate_limiter_flexible',
      '0025_usage_resource_index',
      '0026_message_tree',
      '0027_reply_stop_events',
      '0028_message_attachments',
      '0029_feedback_temporary',
      '0030_access_tokens',
      '0031_mcp_approvals',
      '0032_oauth',
      '0033_list_indexes',
      '0034_text_search_statistics',
      '0035_groups_and_grants',
      '0037_skill_assistants',
      '0038_quotas',
      '0039_group_model_policies',
    ]);
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
        .selectFrom(
          sql<{
            at: Date;
            listed: Date;
            missing: Date | null;
          }>`(select ${text}::timestamptz as at, ${text}::timestamptz as listed, null::timestamptz as missing)`.as('t'),
        )
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

describe('the pool (Postgres)', () => {
  onPostgres('answers Kysely’s queries with their rows, and refuses with Postgres’s error and code', async () => {
    const database = await openPostgres(process.env.TEST_DATABASE_URL as string, { poolSize: 1 });
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
  });

  onPostgres(
    'a connection the server ends, idle or inside a transaction, fails its query and is reported, and the process goes on',
    async () => {
      const lost: string[] = [];
      // The test is about losing connections, not about how soon a new one is made: on a loaded
      // machine a connection can take longer than the service's 5 s.
      const database = await openPostgres(process.env.TEST_DATABASE_URL as string, {
        poolSize: 2,
        connectTimeoutMs: 60_000,
        onConnectionError: (error) => lost.push(error.message),
      });
      const admin = await openPostgres(process.env.TEST_DATABASE_URL as string, { poolSize: 1 });
      const terminate = (pid: number) => sql`select pg_terminate_backend(${pid})`.execute(admin.db);
      try {
        // Inside a transaction: the checked-out client's server goes away between two statements.
        const inTransaction = database.db.transaction().execute(async (trx) => {
          const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
          await terminate(rows[0]!.pid);
          await sql`select pg_sleep(0.2)`.execute(trx);
        });
        const failure = await inTransaction.then(
          () => null,
          (error: unknown) => error,
        );
        expect(isConnectionFailure(failure)).toBe(true);
        // Idle: both pooled connections end while no query holds them.
        const pids = await Promise.all(
          [1, 2].map(
            async () => (await sql<{ pid: number }>`select pg_backend_pid() as pid, pg_sleep(0.05)`.execute(database.db)).rows[0]!.pid,
          ),
        );
        for (const pid of new Set(pids)) await terminate(pid);
        // The pool drops each client it is told of.
        await eventually(() => (database.poolStats()?.total === 0 ? true : undefined));
        // Each lost connection reported once: the one in the transaction and the idle ones.
        expect(lost).toHaveLength(1 + new Set(pids).size);
        // The pool connects again on the next query.
        expect((await sql<{ n: number }>`select 3 as n`.execute(database.db)).rows).toEqual([{ n: 3 }]);
      } finally {
        await admin.close();
        await database.close();
      }
    },
  );
});
