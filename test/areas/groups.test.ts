import { randomUUID } from 'node:crypto';
import { signDevToken } from '../../src/platform/tokens';
import { type Harness, startHarness, type TestUser } from '../helpers/harness';

// Groups are the deployment's: each test names its own.
let h: Harness;
let root: TestUser;
let auditor: TestUser;
let user: TestUser;
const rootId = `root-${randomUUID()}`;

beforeAll(async () => {
  h = await startHarness({ BOOTSTRAP_ADMIN_USER_IDS: rootId });
  const token = await signDevToken(h.runtime.devAuth!, rootId);
  root = { ...(await h.newUser('unused')), userId: rootId, token, auth: { Authorization: `Bearer ${token}` } };
  auditor = await h.newUser('auditor');
  await h
    .http()
    .post('/api/v1/admin/principals')
    .set(root.auth)
    .send({ userId: auditor.userId, role: 'auditor', reason: 'test' })
    .expect(200);
  user = await h.newUser('member');
});
afterAll(() => h.close());

const name = () => `Team ${randomUUID()}`;
const create = async (body: Record<string, unknown>) =>
  (await h.http().post('/api/v1/admin/groups').set(root.auth).send(body).expect(200)).body.group;
const audited = (action: string, resourceId: string) =>
  h.runtime.database.db.selectFrom('audit_events').selectAll().where('action', '=', action).where('resource_id', '=', resourceId).execute();

describe('groups', () => {
  test('an admin creates, reads, renames and deletes a group, each change audited', async () => {
    const groupName = name();
    const group = await create({ name: `  ${groupName} `, description: 'The team.' });
    expect(group).toMatchObject({ name: groupName, description: 'The team.', source: 'manual', memberCount: 0 });
    expect(await audited('administration.group.create', group.groupId)).toHaveLength(1);

    const read = await h.http().get('/api/v1/admin/groups').query({ groupId: group.groupId }).set(auditor.auth).expect(200);
    expect(read.body.group).toEqual(group);
    const page = await h.http().get('/api/v1/admin/groups').query({ limit: 200 }).set(auditor.auth).expect(200);
    expect(page.body.groups.map((g: { groupId: string }) => g.groupId)).toContain(group.groupId);

    const renamed = await h
      .http()
      .patch('/api/v1/admin/groups')
      .set(root.auth)
      .send({ groupId: group.groupId, name: `${groupName} 2` })
      .expect(200);
    expect(renamed.body.group).toMatchObject({ name: `${groupName} 2`, description: 'The team.' });
    expect(await audited('administration.group.update', group.groupId)).toHaveLength(1);

    const deleted = await h.http().delete('/api/v1/admin/groups').set(root.auth).send({ groupId: group.groupId }).expect(200);
    expect(deleted.body).toEqual({ groupId: group.groupId, deleted: true });
    expect(await audited('administration.group.delete', group.groupId)).toHaveLength(1);
    const gone = await h.http().get('/api/v1/admin/groups').query({ groupId: group.groupId }).set(root.auth);
    expect(gone.status).toBe(404);
    expect(gone.body.code).toBe('not_found');
  });

  test('a name another group has, in any case, is a 409 and changes nothing', async () => {
    const taken = name();
    await create({ name: taken });
    const other = await create({ name: name() });
    const duplicate = await h.http().post('/api/v1/admin/groups').set(root.auth).send({ name: taken.toUpperCase() });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.code).toBe('conflict');
    const rename = await h.http().patch('/api/v1/admin/groups').set(root.auth).send({ groupId: other.groupId, name: taken.toLowerCase() });
    expect(rename.status).toBe(409);
    expect((await h.http().get('/api/v1/admin/groups').query({ groupId: other.groupId }).set(root.auth)).body.group.name).toBe(other.name);
  });

  test('bad input is a 400; an unknown group is a 404; nothing is audited for either', async () => {
    for (const body of [{}, { name: '' }, { name: '   ' }, { name: 'x'.repeat(101) }, { name: 'ok', extra: 1 }]) {
      const res = await h.http().post('/api/v1/admin/groups').set(root.auth).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    const group = await create({ name: name() });
    expect((await h.http().patch('/api/v1/admin/groups').set(root.auth).send({ groupId: group.groupId })).status).toBe(400);
    const unknown = randomUUID();
    expect((await h.http().patch('/api/v1/admin/groups').set(root.auth).send({ groupId: unknown, name: name() })).status).toBe(404);
    expect((await h.http().delete('/api/v1/admin/groups').set(root.auth).send({ groupId: unknown })).status).toBe(404);
    expect((await h.http().get('/api/v1/admin/groups/members').query({ groupId: unknown }).set(root.auth)).status).toBe(404);
    expect(
      (
        await h
          .http()
          .patch('/api/v1/admin/groups/members')
          .set(root.auth)
          .send({ groupId: unknown, add: ['bob'] })
      ).status,
    ).toBe(404);
    expect(await audited('administration.group.update', unknown)).toHaveLength(0);
    expect(await audited('administration.group.members.update', unknown)).toHaveLength(0);
  });

  test('a user without a role cannot read or change groups', async () => {
    const group = await create({ name: name() });
    expect((await h.http().get('/api/v1/admin/groups').set(user.auth)).status).toBe(403);
    expect(
      (
        await h
          .http()
          .patch('/api/v1/admin/groups/members')
          .set(user.auth)
          .send({ groupId: group.groupId, add: [user.userId] })
      ).status,
    ).toBe(403);
    expect(
      (
        await h
          .http()
          .patch('/api/v1/admin/groups/members')
          .set(auditor.auth)
          .send({ groupId: group.groupId, add: [user.userId] })
      ).status,
    ).toBe(403);
    const members = await h.http().get('/api/v1/admin/groups/members').query({ groupId: group.groupId }).set(root.auth).expect(200);
    expect(members.body.members).toEqual([]);
  });
});

describe('members', () => {
  test('an admin adds and removes members; adding a member twice keeps one membership', async () => {
    const group = await create({ name: name() });
    const add = await h
      .http()
      .patch('/api/v1/admin/groups/members')
      .set(root.auth)
      .send({ groupId: group.groupId, add: ['carol', 'bob', 'dave'] })
      .expect(200);
    expect(add.body).toEqual({ groupId: group.groupId, memberCount: 3 });
    await h
      .http()
      .patch('/api/v1/admin/groups/members')
      .set(root.auth)
      .send({ groupId: group.groupId, add: ['bob'], remove: ['dave'] })
      .expect(200);

    const first = await h
      .http()
      .get('/api/v1/admin/groups/members')
      .query({ groupId: group.groupId, limit: 1 })
      .set(auditor.auth)
      .expect(200);
    expect(first.body.members).toEqual([{ userId: expect.any(String), source: 'manual', addedAt: expect.any(Number) }]);
    const second = await h
      .http()
      .get('/api/v1/admin/groups/members')
      .query({ groupId: group.groupId, limit: 5, cursor: first.body.nextCursor })
      .set(auditor.auth)
      .expect(200);
    expect(second.body.nextCursor).toBeNull();
    expect([...first.body.members, ...second.body.members].map((m: { userId: string }) => m.userId).sort()).toEqual(['bob', 'carol']);
    expect((await h.http().get('/api/v1/admin/groups').query({ groupId: group.groupId }).set(root.auth)).body.group.memberCount).toBe(2);
    const events = await audited('administration.group.members.update', group.groupId);
    expect(events.map((e) => e.metadata)).toEqual([
      { add: ['carol', 'bob', 'dave'], remove: [], memberCount: 3 },
      { add: ['bob'], remove: ['dave'], memberCount: 2 },
    ]);
  });

  test('a user in both lists, an empty change or a bad user id is a 400 and changes nothing', async () => {
    const group = await create({ name: name() });
    for (const body of [
      { groupId: group.groupId, add: ['bob'], remove: ['bob'] },
      { groupId: group.groupId },
      { groupId: group.groupId, add: [] },
      { groupId: group.groupId, add: [''] },
      { groupId: group.groupId, add: ['bob', 'bob'] },
    ]) {
      const res = await h.http().patch('/api/v1/admin/groups/members').set(root.auth).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    expect((await h.http().get('/api/v1/admin/groups/members').query({ groupId: group.groupId }).set(root.auth)).body.members).toEqual([]);
  });

  test('deleting a group ends its memberships', async () => {
    const group = await create({ name: name() });
    await h
      .http()
      .patch('/api/v1/admin/groups/members')
      .set(root.auth)
      .send({ groupId: group.groupId, add: [user.userId] })
      .expect(200);
    await h.http().delete('/api/v1/admin/groups').set(root.auth).send({ groupId: group.groupId }).expect(200);
    const left = await h.runtime.database.db.selectFrom('group_members').select('user_id').where('group_id', '=', group.groupId).execute();
    expect(left).toEqual([]);
  });
});
