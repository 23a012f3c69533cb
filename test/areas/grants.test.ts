import { randomUUID } from 'node:crypto';
import { uuidv7 } from '../../src/platform/ids';
import { type Harness, startHarness, type TestUser, userNamed } from '../helpers/harness';

// Access grants over HTTP: who may share what, with whom, and who may end it.
let h: Harness;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser;
let admin: TestUser;
const adminId = `root-${randomUUID()}`;

beforeAll(async () => {
  h = await startHarness({ BOOTSTRAP_ADMIN_USER_IDS: adminId });
  alice = await h.newUser('alice');
  bob = await h.newUser('bob');
  carol = await h.newUser('carol');
  admin = await userNamed(h, adminId);
});
afterAll(() => h.close());

const skillOf = async (user: TestUser) =>
  (
    await h
      .http()
      .post('/api/v1/skills')
      .set(user.auth)
      .send({ name: `Skill ${randomUUID()}` })
      .expect(200)
  ).body.skill.skillId as string;
const groupWith = async (...members: TestUser[]) => {
  const group = (
    await h
      .http()
      .post('/api/v1/admin/groups')
      .set(admin.auth)
      .send({ name: `Team ${randomUUID()}` })
      .expect(200)
  ).body.group;
  if (members.length > 0) {
    await h
      .http()
      .patch('/api/v1/admin/groups/members')
      .set(admin.auth)
      .send({ groupId: group.groupId, add: members.map((m) => m.userId) })
      .expect(200);
  }
  return group.groupId as string;
};
const share = (user: TestUser, body: Record<string, unknown>) => h.http().post('/api/v1/grants').set(user.auth).send(body);
const grantsOn = (user: TestUser, resourceKind: string, resourceId: string) =>
  h.http().get('/api/v1/grants').query({ resourceKind, resourceId }).set(user.auth);
const folderOf = async (user: TestUser) =>
  (
    await h
      .http()
      .post('/api/v1/files')
      .set(user.auth)
      .send({ name: `Folder ${randomUUID()}`, kind: 'folder' })
      .expect(200)
  ).body.file.fileId as string;
const sees = async (user: TestUser, fileId: string) =>
  (await h.http().get('/api/v1/files').query({ fileId }).set(user.auth)).status === 200;

describe('access grants', () => {
  test('an owner shares, re-shares with another permission, lists and ends a grant', async () => {
    const skillId = await skillOf(alice);
    const body = { resourceKind: 'skill', resourceId: skillId, principalKind: 'user', principalId: bob.userId, permission: 'read' };
    const first = (await share(alice, body).expect(200)).body.grant;
    expect(first).toMatchObject({ ...body, grantedBy: alice.userId });

    // The same principal again: one grant, its permission changed.
    const second = (await share(alice, { ...body, permission: 'use' }).expect(200)).body.grant;
    expect(second).toMatchObject({ grantId: first.grantId, permission: 'use' });
    expect(second.updatedAt).toBeGreaterThanOrEqual(first.updatedAt);
    const listed = await grantsOn(alice, 'skill', skillId).expect(200);
    expect(listed.body).toEqual({ grants: [second], nextCursor: null });

    await h
      .http()
      .delete('/api/v1/grants')
      .query({ grantId: first.grantId })
      .set(alice.auth)
      .expect(200, { grantId: first.grantId, deleted: true });
    expect((await grantsOn(alice, 'skill', skillId).expect(200)).body.grants).toEqual([]);
    const again = await h.http().delete('/api/v1/grants').send({ grantId: first.grantId }).set(alice.auth);
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('not_found');
  });

  test("a grantee cannot share, list or end others' grants (403); anyone else gets 404 and changes nothing", async () => {
    const fileId = await folderOf(alice);
    const toBob = (
      await share(alice, {
        resourceKind: 'file',
        resourceId: fileId,
        principalKind: 'user',
        principalId: bob.userId,
        permission: 'read',
      }).expect(200)
    ).body.grant;
    const toAdmin = (
      await share(alice, {
        resourceKind: 'file',
        resourceId: fileId,
        principalKind: 'user',
        principalId: admin.userId,
        permission: 'read',
      }).expect(200)
    ).body.grant;

    const reshare = await share(bob, {
      resourceKind: 'file',
      resourceId: fileId,
      principalKind: 'user',
      principalId: carol.userId,
      permission: 'read',
    });
    expect(reshare.status).toBe(403);
    expect(reshare.body.code).toBe('forbidden');
    expect((await grantsOn(bob, 'file', fileId)).status).toBe(403);
    expect((await h.http().delete('/api/v1/grants').query({ grantId: toAdmin.grantId }).set(bob.auth)).status).toBe(403);

    for (const attempt of [
      share(carol, { resourceKind: 'file', resourceId: fileId, principalKind: 'user', principalId: bob.userId, permission: 'read' }),
      grantsOn(carol, 'file', fileId),
      h.http().delete('/api/v1/grants').query({ grantId: toBob.grantId }).set(carol.auth),
    ]) {
      const res = await attempt;
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect((await grantsOn(alice, 'file', fileId).expect(200)).body.grants.map((g: { grantId: string }) => g.grantId).sort()).toEqual(
      [toBob.grantId, toAdmin.grantId].sort(),
    );

    // A grantee leaves what was shared with them.
    await h.http().delete('/api/v1/grants').query({ grantId: toBob.grantId }).set(bob.auth).expect(200);
    expect((await grantsOn(alice, 'file', fileId).expect(200)).body.grants.map((g: { grantId: string }) => g.grantId)).toEqual([
      toAdmin.grantId,
    ]);
  });

  test('bad input is 400 and gives nothing', async () => {
    const skillId = await skillOf(alice);
    const fileId = await folderOf(alice);
    const cases: Array<[Record<string, unknown>, string]> = [
      [
        { resourceKind: 'skill', resourceId: skillId, principalKind: 'user', principalId: alice.userId, permission: 'read' },
        '/body/principalId',
      ],
      [{ resourceKind: 'file', resourceId: fileId, principalKind: 'user', principalId: bob.userId, permission: 'use' }, '/body/permission'],
      [{ resourceKind: 'project', resourceId: skillId, principalKind: 'user', principalId: bob.userId, permission: 'edit' }, ''],
      [
        { resourceKind: 'note', resourceId: skillId, principalKind: 'user', principalId: bob.userId, permission: 'read' },
        '/body/resourceKind',
      ],
      [
        { resourceKind: 'skill', resourceId: skillId, principalKind: 'role', principalId: bob.userId, permission: 'read' },
        '/body/principalKind',
      ],
      [
        { resourceKind: 'skill', resourceId: skillId, principalKind: 'user', principalId: bob.userId, permission: 'own' },
        '/body/permission',
      ],
      [{ resourceKind: 'skill', resourceId: skillId, principalKind: 'user', principalId: ' ', permission: 'read' }, '/body/principalId'],
      [{ resourceKind: 'skill', resourceId: skillId, principalKind: 'user', principalId: bob.userId }, '/body/permission'],
      [
        { resourceKind: 'skill', resourceId: skillId, principalKind: 'user', principalId: bob.userId, permission: 'read', extra: 1 },
        '/body/extra',
      ],
    ];
    for (const [body, path] of cases) {
      const res = await share(alice, body);
      // A project that is not the caller's is a missing resource, not a bad permission.
      expect(res.status).toBe(path === '' ? 404 : 400);
      if (path !== '') expect(JSON.stringify(res.body.details)).toContain(path);
    }
    expect((await grantsOn(alice, 'skill', skillId).expect(200)).body.grants).toEqual([]);
    expect((await grantsOn(alice, 'file', fileId).expect(200)).body.grants).toEqual([]);
    expect((await h.http().get('/api/v1/grants').query({ resourceKind: 'skill' }).set(alice.auth)).status).toBe(400);
  });

  test('a group must exist and have the caller in it, unless the caller is an admin', async () => {
    const fileId = await folderOf(alice);
    const theirs = await groupWith(bob);
    const ours = await groupWith(alice, bob);
    const grant = (groupId: string) =>
      share(alice, { resourceKind: 'file', resourceId: fileId, principalKind: 'group', principalId: groupId, permission: 'read' });

    for (const groupId of [theirs, uuidv7()]) {
      const res = await grant(groupId);
      expect(res.status).toBe(404);
      expect(res.body.details).toEqual([expect.objectContaining({ path: '/body/principalId' })]);
    }
    expect(await sees(bob, fileId)).toBe(false);
    expect((await grant(ours).expect(200)).body.grant).toMatchObject({ principalKind: 'group', principalId: ours, permission: 'read' });
    expect(await sees(bob, fileId)).toBe(true);
    expect(await sees(carol, fileId)).toBe(false);

    // An admin shares their own with any group; an access token without `admin` does not make them one.
    const adminFile = await folderOf(admin);
    const pat = await h
      .http()
      .post('/api/v1/access-tokens')
      .set(admin.auth)
      .send({ name: 'writer', scopes: ['read', 'write'] })
      .expect(200);
    const byToken = await share(
      { ...admin, auth: { Authorization: `Bearer ${pat.body.token as string}` } },
      { resourceKind: 'file', resourceId: adminFile, principalKind: 'group', principalId: theirs, permission: 'read' },
    );
    expect(byToken.status).toBe(404);
    expect(await sees(bob, adminFile)).toBe(false);
    await share(admin, {
      resourceKind: 'file',
      resourceId: adminFile,
      principalKind: 'group',
      principalId: theirs,
      permission: 'read',
    }).expect(200);
    expect(await sees(bob, adminFile)).toBe(true);

    // Leaving the group, or the group's deletion, ends what it was given on the next request.
    await h
      .http()
      .patch('/api/v1/admin/groups/members')
      .set(admin.auth)
      .send({ groupId: theirs, remove: [bob.userId] })
      .expect(200);
    expect(await sees(bob, adminFile)).toBe(false);
    await h.http().delete('/api/v1/admin/groups').set(admin.auth).send({ groupId: ours }).expect(200);
    expect((await grantsOn(alice, 'file', fileId).expect(200)).body.grants).toEqual([]);
    expect(await sees(bob, fileId)).toBe(false);
  });

  test('a file shared through grants is the file share of 1.0.0, both ways', async () => {
    const fileId = await folderOf(alice);
    const granted = (
      await share(alice, {
        resourceKind: 'file',
        resourceId: fileId,
        principalKind: 'user',
        principalId: bob.userId,
        permission: 'read',
      }).expect(200)
    ).body.grant;
    const own = await h.http().get('/api/v1/files').query({ fileId }).set(alice.auth).expect(200);
    expect(own.body.file.sharedWith).toEqual([bob.userId]);
    expect((await h.http().get('/api/v1/files').query({ fileId }).set(bob.auth).expect(200)).body.file.access).toBe('shared');

    await h
      .http()
      .patch('/api/v1/files/share')
      .set(alice.auth)
      .send({ fileId, remove: [bob.userId] })
      .expect(200, { fileId, sharedWith: [] });
    expect((await grantsOn(alice, 'file', fileId).expect(200)).body.grants).toEqual([]);
    expect((await h.http().delete('/api/v1/grants').query({ grantId: granted.grantId }).set(alice.auth)).status).toBe(404);
    await h
      .http()
      .patch('/api/v1/files/share')
      .set(alice.auth)
      .send({ fileId, add: [carol.userId] })
      .expect(200);
    expect((await grantsOn(alice, 'file', fileId).expect(200)).body.grants).toEqual([
      expect.objectContaining({ principalKind: 'user', principalId: carol.userId, permission: 'read', grantedBy: alice.userId }),
    ]);
  });

  test('a resource holds at most 500 grants; a principal who has one may still change it', async () => {
    const skillId = await skillOf(alice);
    const at = new Date();
    await h.runtime.database.db
      .insertInto('access_grants')
      .values(
        Array.from({ length: 500 }, (_, i) => ({
          id: uuidv7(),
          resource_kind: 'skill',
          resource_id: skillId,
          principal_kind: 'user',
          principal_id: `user-${i}`,
          permission: 'read',
          granted_by: alice.userId,
          created_at: at,
          updated_at: at,
        })),
      )
      .execute();
    const full = await share(alice, {
      resourceKind: 'skill',
      resourceId: skillId,
      principalKind: 'user',
      principalId: bob.userId,
      permission: 'read',
    });
    expect(full.status).toBe(409);
    expect(full.body.code).toBe('conflict');
    await share(alice, {
      resourceKind: 'skill',
      resourceId: skillId,
      principalKind: 'user',
      principalId: 'user-7',
      permission: 'use',
    }).expect(200);
    const page = await h
      .http()
      .get('/api/v1/grants')
      .query({ resourceKind: 'skill', resourceId: skillId, limit: 200 })
      .set(alice.auth)
      .expect(200);
    expect(page.body.grants).toHaveLength(200);
    expect(page.body.nextCursor).toEqual(expect.any(String));
  });
});

describe("the caller's groups", () => {
  test('a member lists the groups they are in, newest joined first; others see none of them', async () => {
    const first = await groupWith(carol);
    const second = await groupWith(carol, bob);
    const mine = await h.http().get('/api/v1/groups').set(carol.auth).expect(200);
    const ids = mine.body.groups.map((g: { groupId: string }) => g.groupId);
    expect(ids.indexOf(second)).toBeLessThan(ids.indexOf(first));
    expect(mine.body.groups.find((g: { groupId: string }) => g.groupId === second)).toEqual({
      groupId: second,
      name: expect.stringMatching(/^Team /),
      description: '',
      source: 'manual',
      joinedAt: expect.any(Number),
    });
    const theirs = (await h.http().get('/api/v1/groups').set(bob.auth).expect(200)).body.groups.map((g: { groupId: string }) => g.groupId);
    expect(theirs).toContain(second);
    expect(theirs).not.toContain(first);
    const outsider = await h.newUser('outsider');
    expect((await h.http().get('/api/v1/groups').set(outsider.auth).expect(200)).body).toEqual({ groups: [], nextCursor: null });
    const paged = await h.http().get('/api/v1/groups').query({ limit: 1 }).set(carol.auth).expect(200);
    expect(paged.body.groups).toHaveLength(1);
    const next = await h.http().get('/api/v1/groups').query({ limit: 1, cursor: paged.body.nextCursor }).set(carol.auth).expect(200);
    expect(next.body.groups[0].groupId).not.toBe(paged.body.groups[0].groupId);
    expect((await h.http().get('/api/v1/groups').query({ limit: 0 }).set(carol.auth)).status).toBe(400);
  });
});
