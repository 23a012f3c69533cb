import { Migrator, sql } from 'kysely';
import { type DatabaseHandle, openPglite } from '../../src/platform/db';
import { MIGRATIONS, migrateToLatest } from '../../src/platform/db/migrate';

let database: DatabaseHandle;
beforeAll(async () => {
  database = await openPglite(null);
});
afterAll(() => database.close());

const grants = (db: DatabaseHandle['db']) =>
  sql<{
    resource_kind: string;
    resource_id: string;
    principal_kind: string;
    principal_id: string;
    permission: string;
    granted_by: string;
  }>`select resource_kind, resource_id, principal_kind, principal_id, permission, granted_by from access_grants
     order by resource_id, principal_id`.execute(db);

test('file shares become read grants to users; deleting a file, project, skill or group forgets its grants', async () => {
  const { db } = database;
  const migrator = new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } });
  expect((await migrator.migrateTo('0034_text_search_statistics')).error).toBeUndefined();
  await sql`insert into files (id, owner_user_id, kind, name, status) values
              ('f1', 'alice', 'file', 'a.txt', 'ready'), ('f2', 'alice', 'file', 'b.txt', 'ready')`.execute(db);
  await sql`insert into file_shares (file_id, grantee_user_id) values ('f1', 'bob'), ('f1', 'carol'), ('f2', 'bob')`.execute(db);

  expect(await migrateToLatest(db)).toContain('0035_groups_and_grants');
  const share = (resource: string, user: string) => ({
    resource_kind: 'file',
    resource_id: resource,
    principal_kind: 'user',
    principal_id: user,
    permission: 'read',
    granted_by: 'alice',
  });
  expect((await grants(db)).rows).toEqual([share('f1', 'bob'), share('f1', 'carol'), share('f2', 'bob')]);

  await sql`insert into projects (id, owner_user_id, name) values ('p1', 'alice', 'P')`.execute(db);
  await sql`insert into skills (id, owner_user_id, name) values ('s1', 'alice', 'S')`.execute(db);
  await sql`insert into groups (id, name) values ('g1', 'Team')`.execute(db);
  await sql`insert into access_grants (id, resource_kind, resource_id, principal_kind, principal_id, permission, granted_by) values
              ('a1', 'project', 'p1', 'user', 'bob', 'read', 'alice'),
              ('a2', 'skill', 's1', 'user', 'dave', 'use', 'alice'),
              ('a3', 'file', 'f2', 'group', 'g1', 'read', 'alice')`.execute(db);
  await sql`delete from files where id = 'f1'`.execute(db);
  await sql`delete from projects where id = 'p1'`.execute(db);
  await sql`delete from skills where id = 's1'`.execute(db);
  await sql`delete from groups where id = 'g1'`.execute(db);
  // Only the share of the file that is left, to a user, remains.
  expect((await grants(db)).rows).toEqual([share('f2', 'bob')]);
});

test('migrating down gives the users’ file grants back as file shares', async () => {
  const { db } = database;
  const migrator = new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } });
  expect((await migrator.migrateTo('0034_text_search_statistics')).error).toBeUndefined();
  const shares = await sql<{ file_id: string; grantee_user_id: string }>`select file_id, grantee_user_id from file_shares`.execute(db);
  expect(shares.rows).toEqual([{ file_id: 'f2', grantee_user_id: 'bob' }]);
  expect(await migrateToLatest(db)).toContain('0035_groups_and_grants');
});
