import { Migrator, sql } from 'kysely';
import { type DatabaseHandle, openPglite } from '../../src/platform/db';
import { MIGRATIONS, migrateToLatest } from '../../src/platform/db/migrate';

let database: DatabaseHandle;
beforeAll(async () => {
  database = await openPglite(null);
  expect((await migrateToLatest(database.db)).length).toBeGreaterThan(0);
});
afterAll(() => database.close());

const tables = async (db: DatabaseHandle['db']) =>
  (
    await sql<{ name: string }>`select table_name as name from information_schema.tables
                                where table_name in ('group_model_policies', 'group_claim_syncs') order by 1`.execute(db)
  ).rows.map((row) => row.name);

test('a deleted group takes its model policy, a deleted connection its grants; down and up again', async () => {
  const { db } = database;
  await sql`insert into groups (id, name) values ('g1', 'Team'), ('g2', 'Other')`.execute(db);
  await sql`insert into group_model_policies (group_id, allow, updated_by) values ('g1', '["m"]', 'root'), ('g2', null, 'root')`.execute(
    db,
  );
  await sql`insert into model_connections (id, owner_user_id, kind, name) values ('c1', 'root', 'openai', 'Key'), ('c2', 'root', 'openai', 'Kept')`.execute(
    db,
  );
  await sql`insert into access_grants (id, resource_kind, resource_id, principal_kind, principal_id, permission, granted_by) values
              ('a1', 'connection', 'c1', 'user', 'bob', 'use', 'root'),
              ('a2', 'connection', 'c2', 'user', 'bob', 'use', 'root'),
              ('a3', 'model', 'c1', 'user', 'bob', 'use', 'root')`.execute(db);
  await sql`delete from groups where id = 'g1'`.execute(db);
  await sql`delete from model_connections where id = 'c1'`.execute(db);
  const policies = await sql<{ group_id: string; block: unknown }>`select group_id, block from group_model_policies`.execute(db);
  expect(policies.rows).toEqual([{ group_id: 'g2', block: [] }]);
  // Only the grant of the deleted connection goes (a model of the same id is another resource).
  const grants = await sql<{ id: string }>`select id from access_grants order by id`.execute(db);
  expect(grants.rows.map((row) => row.id)).toEqual(['a2', 'a3']);

  const migrator = new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } });
  // Down to the migration before 0039, whichever it is.
  const names = Object.keys(MIGRATIONS);
  const before = names[names.indexOf('0039_group_model_policies') - 1] as string;
  expect((await migrator.migrateTo(before)).error).toBeUndefined();
  expect(await tables(db)).toEqual([]);
  await sql`delete from model_connections where id = 'c2'`.execute(db);
  expect((await sql<{ id: string }>`select id from access_grants order by id`.execute(db)).rows.map((row) => row.id)).toEqual(['a2', 'a3']);
  expect(await migrateToLatest(db)).toContain('0039_group_model_policies');
  expect(await tables(db)).toEqual(['group_claim_syncs', 'group_model_policies']);
});
