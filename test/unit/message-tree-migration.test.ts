import { Migrator, sql } from 'kysely';
import { type DatabaseHandle, openPglite } from '../../src/platform/db';
import { MIGRATIONS, migrateToLatest } from '../../src/platform/db/migrate';

let database: DatabaseHandle;
beforeAll(async () => {
  database = await openPglite(null);
});
afterAll(() => database.close());

test('conversations written before the message tree become one branch each, in the order they were written', async () => {
  const { db } = database;
  const migrator = new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } });
  const before = await migrator.migrateTo('0025_usage_resource_index');
  expect(before.error).toBeUndefined();
  await sql`insert into conversations (id, owner_user_id, title) values ('c1', 'u1', 'One'), ('c2', 'u1', 'Two'), ('c3', 'u1', 'Empty')`.execute(
    db,
  );
  await sql`
    insert into messages (id, conversation_id, owner_user_id, role, kind, content, status) values
      ('m1', 'c1', 'u1', 'user', 'message', 'Hi', 'complete'),
      ('m2', 'c1', 'u1', 'assistant', 'reply', 'Hello', 'complete'),
      ('m3', 'c1', 'u1', 'user', 'message', 'Again', 'complete'),
      ('m4', 'c1', 'u1', 'assistant', 'reply', '', 'failed'),
      ('n1', 'c2', 'u1', 'assistant', 'greeting', 'Welcome', 'complete')`.execute(db);
  expect(await migrateToLatest(db)).toContain('0026_message_tree');
  const messages = await sql<{ id: string; parent_id: string | null }>`select id, parent_id from messages order by id`.execute(db);
  expect(messages.rows).toEqual([
    { id: 'm1', parent_id: null },
    { id: 'm2', parent_id: 'm1' },
    { id: 'm3', parent_id: 'm2' },
    { id: 'm4', parent_id: 'm3' },
    { id: 'n1', parent_id: null },
  ]);
  const conversations = await sql<{
    id: string;
    current_leaf_id: string | null;
  }>`select id, current_leaf_id from conversations order by id`.execute(db);
  expect(conversations.rows).toEqual([
    { id: 'c1', current_leaf_id: 'm4' },
    { id: 'c2', current_leaf_id: 'n1' },
    { id: 'c3', current_leaf_id: null },
  ]);
});
