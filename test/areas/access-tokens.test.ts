import { randomUUID } from 'node:crypto';
import supertest from 'supertest';
import { anotherInstance, type Harness, startHarness, type TestUser, userNamed } from '../helpers/harness';

let h: Harness;
let alice: TestUser;
let bob: TestUser;
let admin: TestUser;
const adminId = `root-${randomUUID()}`;

beforeAll(async () => {
  h = await startHarness({ BOOTSTRAP_ADMIN_USER_IDS: adminId, ACCESS_TOKEN_RATE_LIMIT_PER_MINUTE: '1000000' });
  alice = await h.newUser('alice');
  bob = await h.newUser('bob');
  admin = await userNamed(h, adminId);
});
afterAll(() => h.close());

async function create(user: TestUser, body: Record<string, unknown>) {
  const res = await h.http().post('/api/v1/access-tokens').set(user.auth).send(body);
  expect(res.status).toBe(200);
  return { id: res.body.accessToken.tokenId as string, auth: { Authorization: `Bearer ${res.body.token as string}` }, body: res.body };
}

const auditEvents = (action: string, resourceId: string) =>
  h.runtime.database.db.selectFrom('audit_events').selectAll().where('action', '=', action).where('resource_id', '=', resourceId).execute();

describe('personal access tokens', () => {
  test('created with name, scopes and expiry; the secret shown once; accepted as a bearer token; audited', async () => {
    const before = Date.now();
    const token = await create(alice, { name: 'Editor plug-in', scopes: ['read', 'write'] });
    expect(token.body.token).toMatch(/^aiws_pat_[A-Za-z0-9_-]{12}_[A-Za-z0-9_-]{43}$/);
    expect(token.body.accessToken).toMatchObject({
      name: 'Editor plug-in',
      scopes: ['read', 'write'],
      status: 'active',
      lastUsedAt: null,
      revokedAt: null,
    });
    expect(token.body.token.startsWith(token.body.accessToken.prefix)).toBe(true);
    // 30 days by default.
    expect(token.body.accessToken.expiresAt).toBeGreaterThanOrEqual(before + 30 * 86_400_000);

    const note = await h.http().post('/api/v1/notes').set(token.auth).send({ title: 'By token', content: 'x' });
    expect(note.status).toBe(200);
    const notes = await h.http().get('/api/v1/notes').set(alice.auth).expect(200);
    expect(notes.body.notes.map((n: { noteId: string }) => n.noteId)).toContain(note.body.note.noteId);

    const listed = await h.http().get('/api/v1/access-tokens').set(alice.auth).expect(200);
    expect(listed.body.accessTokens).toHaveLength(1);
    expect(JSON.stringify(listed.body)).not.toContain(token.body.token.slice(-43));
    expect(listed.body.accessTokens[0].lastUsedAt).toEqual(expect.any(Number));
    const one = await h.http().get('/api/v1/access-tokens').query({ tokenId: token.id }).set(alice.auth).expect(200);
    expect(one.body.accessToken.tokenId).toBe(token.id);
    // Only the hash is stored.
    const row = await h.runtime.database.db.selectFrom('access_tokens').selectAll().where('id', '=', token.id).executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(token.body.token.slice(-43));
    expect(await auditEvents('access_token.create', token.id)).toHaveLength(1);
  });

  test('a token without the scope an operation names gets 403 insufficient_scope naming it', async () => {
    const reader = await create(alice, { name: 'reader', scopes: ['read'] });
    expect((await h.http().get('/api/v1/projects').set(reader.auth)).status).toBe(200);
    const refused = await h.http().post('/api/v1/projects').set(reader.auth).send({ name: 'No' });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: 'insufficient_scope', scope: 'write' });
    expect(refused.headers['www-authenticate']).toContain('error="insufficient_scope", scope="write"');
    const chat = await h.http().post('/api/v1/conversations').set(reader.auth).send({ title: 'No' });
    expect(chat.body).toMatchObject({ code: 'insufficient_scope', scope: 'chat' });
    // Nothing was created.
    const projects = await h.http().get('/api/v1/projects').set(alice.auth).expect(200);
    expect(projects.body.projects.filter((p: { name: string }) => p.name === 'No')).toHaveLength(0);
    // A capability-gated operation says the same.
    const automations = await h.http().post('/api/v1/automations').set(reader.auth).send({});
    expect(automations.body).toMatchObject({ code: 'insufficient_scope', scope: 'write' });
  });

  test('a revoked token is refused on the next request, on every instance; revoking is audited', async () => {
    const token = await create(alice, { name: 'to revoke', scopes: ['read'] });
    const other = await anotherInstance(h);
    try {
      expect((await supertest(other.app).get('/api/v1/notes').set(token.auth)).status).toBe(200);
      const revoked = await h.http().delete('/api/v1/access-tokens').query({ tokenId: token.id }).set(alice.auth);
      expect(revoked.status).toBe(200);
      expect(revoked.body.accessToken).toMatchObject({ status: 'revoked', revokedAt: expect.any(Number) });
      for (const app of [h.runtime.app, other.app]) {
        const refused = await supertest(app).get('/api/v1/notes').set(token.auth);
        expect(refused.status).toBe(401);
        expect(refused.body.error).toBe('The access token was revoked.');
        expect(refused.headers['www-authenticate']).toContain('error="invalid_token"');
      }
    } finally {
      await other.close();
    }
    // Revoking again answers it as it is; the body form works too.
    const again = await h.http().delete('/api/v1/access-tokens').set(alice.auth).send({ tokenId: token.id }).expect(200);
    expect(again.body.accessToken.status).toBe('revoked');
    expect(await auditEvents('access_token.revoke', token.id)).toHaveLength(2);
  });

  test('an expired token is refused on the next request', async () => {
    const token = await create(alice, { name: 'short', scopes: ['read'] });
    expect((await h.http().get('/api/v1/notes').set(token.auth)).status).toBe(200);
    await h.runtime.database.db
      .updateTable('access_tokens')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', token.id)
      .execute();
    const refused = await h.http().get('/api/v1/notes').set(token.auth);
    expect(refused.status).toBe(401);
    expect(refused.body.error).toBe('The access token expired.');
    const listed = await h.http().get('/api/v1/access-tokens').query({ tokenId: token.id }).set(alice.auth).expect(200);
    expect(listed.body.accessToken.status).toBe('expired');
  });

  test('a forged or altered token is 401 and stands for nobody', async () => {
    const token = await create(alice, { name: 'real', scopes: ['read'] });
    const secret = token.auth.Authorization.slice('Bearer '.length);
    for (const forged of [
      `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`,
      'aiws_pat_nothing',
      `aiws_pat_${'x'.repeat(12)}_${'y'.repeat(43)}`,
    ]) {
      const res = await h
        .http()
        .get('/api/v1/notes')
        .set({ Authorization: `Bearer ${forged}` });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('The access token is not valid.');
    }
  });

  test("another user's token cannot be read or revoked (404), and a token sees only its user's data", async () => {
    const token = await create(alice, { name: 'alice only', scopes: ['read', 'write'] });
    expect((await h.http().get('/api/v1/access-tokens').query({ tokenId: token.id }).set(bob.auth)).status).toBe(404);
    const revoke = await h.http().delete('/api/v1/access-tokens').query({ tokenId: token.id }).set(bob.auth);
    expect(revoke.status).toBe(404);
    expect(revoke.body.code).toBe('not_found');
    expect((await h.http().get('/api/v1/notes').set(token.auth)).status).toBe(200);
    const bobNote = await h.http().post('/api/v1/notes').set(bob.auth).send({ title: 'Bob', content: 'private' }).expect(200);
    expect((await h.http().get('/api/v1/notes').query({ noteId: bobNote.body.note.noteId }).set(token.auth)).status).toBe(404);
    const bobList = await h.http().get('/api/v1/access-tokens').set(bob.auth).expect(200);
    expect(bobList.body.accessTokens.map((t: { tokenId: string }) => t.tokenId)).not.toContain(token.id);
  });

  test('bad input is 400 and creates nothing', async () => {
    const user = await h.newUser('bad');
    const bodies = [
      {},
      { name: '', scopes: ['read'] },
      { name: 'x', scopes: [] },
      { name: 'x', scopes: ['everything'] },
      { name: 'x', scopes: ['read', 'read'] },
      { name: 'x', scopes: ['read'], expiresAt: Date.now() - 1000 },
      { name: 'x', scopes: ['read'], expiresAt: Date.now() + 400 * 86_400_000 },
      { name: 'x', scopes: ['read'], extra: true },
    ];
    for (const body of bodies) {
      const res = await h.http().post('/api/v1/access-tokens').set(user.auth).send(body);
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: 'invalid_request' });
    }
    expect((await h.http().delete('/api/v1/access-tokens').set(user.auth)).status).toBe(400);
    const listed = await h.http().get('/api/v1/access-tokens').set(user.auth).expect(200);
    expect(listed.body.accessTokens).toEqual([]);
  });

  test('a token cannot create or revoke tokens, nor start a session; admin needs a role', async () => {
    const writer = await create(alice, { name: 'writer', scopes: ['read', 'write'] });
    const other = await create(alice, { name: 'other', scopes: ['read'] });
    const minted = await h
      .http()
      .post('/api/v1/access-tokens')
      .set(writer.auth)
      .send({ name: 'copy', scopes: ['read'] });
    expect(minted.status).toBe(403);
    expect(minted.body.error).toContain('own sign-in');
    expect((await h.http().delete('/api/v1/access-tokens').query({ tokenId: other.id }).set(writer.auth)).status).toBe(403);
    expect((await h.http().get('/api/v1/notes').set(other.auth)).status).toBe(200);
    // Reading the list is reading.
    expect((await h.http().get('/api/v1/access-tokens').set(writer.auth)).status).toBe(200);
    const session = await h.http().post('/auth/session').set(writer.auth);
    expect(session.status).toBe(403);
    expect(session.headers['set-cookie']).toBeUndefined();

    const noRole = await h
      .http()
      .post('/api/v1/access-tokens')
      .set(alice.auth)
      .send({ name: 'admin', scopes: ['admin'] });
    expect(noRole.status).toBe(403);
    expect(noRole.body.error).toContain('administrative role');
  });

  test('an admin token works on administration routes while its user holds the role; admins list and revoke any token', async () => {
    const adminToken = await create(admin, { name: 'ops', scopes: ['admin'] });
    const listed = await h.http().get('/api/v1/admin/access-tokens').query({ userId: alice.userId }).set(adminToken.auth);
    expect(listed.status).toBe(200);
    expect(listed.body.accessTokens.length).toBeGreaterThan(0);
    expect(listed.body.accessTokens.every((t: { userId: string }) => t.userId === alice.userId)).toBe(true);
    const target = await create(alice, { name: 'admin revokes', scopes: ['read'] });
    const one = await h.http().get('/api/v1/admin/access-tokens').query({ tokenId: target.id }).set(adminToken.auth).expect(200);
    expect(one.body.accessToken).toMatchObject({ tokenId: target.id, userId: alice.userId });
    const revoked = await h.http().delete('/api/v1/admin/access-tokens').query({ tokenId: target.id }).set(adminToken.auth);
    expect(revoked.status).toBe(200);
    expect((await h.http().get('/api/v1/notes').set(target.auth)).status).toBe(401);
    const [event] = await auditEvents('access_token.revoke', target.id);
    expect(event).toMatchObject({ actor_user_id: adminId });
    expect((await h.http().delete('/api/v1/admin/access-tokens').query({ tokenId: randomUUID() }).set(adminToken.auth)).status).toBe(404);
    // The admin token holds no other scope.
    expect((await h.http().get('/api/v1/notes').set(adminToken.auth)).body).toMatchObject({ code: 'insufficient_scope', scope: 'read' });
    // A read token of the admin cannot use administration routes.
    const reader = await create(admin, { name: 'admin reader', scopes: ['read'] });
    expect((await h.http().get('/api/v1/admin/access-tokens').set(reader.auth)).body).toMatchObject({
      code: 'insufficient_scope',
      scope: 'admin',
    });
    // A user who loses the role: the admin scope opens nothing any more.
    const deputy = await h.newUser('deputy');
    await h
      .http()
      .post('/api/v1/admin/principals')
      .set(admin.auth)
      .send({ userId: deputy.userId, role: 'admin', reason: 'test' })
      .expect(200);
    const deputyToken = await create(deputy, { name: 'deputy', scopes: ['admin'] });
    expect((await h.http().get('/api/v1/admin/access-tokens').set(deputyToken.auth)).status).toBe(200);
    await h.http().delete('/api/v1/admin/principals').query({ userId: deputy.userId }).set(admin.auth).expect(200);
    expect((await h.http().get('/api/v1/admin/access-tokens').set(deputyToken.auth)).status).toBe(403);
    // Not an admin: 403.
    expect((await h.http().get('/api/v1/admin/access-tokens').set(alice.auth)).status).toBe(403);
  });

  test('a user holds at most ACCESS_TOKEN_MAX_PER_USER live tokens', async () => {
    const limited = await startHarness({ ACCESS_TOKEN_MAX_PER_USER: '2' });
    try {
      const user = await limited.newUser('many');
      const send = () =>
        limited
          .http()
          .post('/api/v1/access-tokens')
          .set(user.auth)
          .send({ name: 'n', scopes: ['read'] });
      const first = await send();
      expect((await send()).status).toBe(200);
      expect((await send()).status).toBe(409);
      await limited.http().delete('/api/v1/access-tokens').query({ tokenId: first.body.accessToken.tokenId }).set(user.auth).expect(200);
      expect((await send()).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  test('each token is rate-limited on its own, within its user', async () => {
    const limited = await startHarness({ ACCESS_TOKEN_RATE_LIMIT_PER_MINUTE: '3' });
    try {
      const user = await limited.newUser('busy');
      const created = await limited
        .http()
        .post('/api/v1/access-tokens')
        .set(user.auth)
        .send({ name: 'busy', scopes: ['read'] })
        .expect(200);
      const auth = { Authorization: `Bearer ${created.body.token as string}` };
      const statuses = [];
      for (let i = 0; i < 4; i += 1) statuses.push((await limited.http().get('/api/v1/notes').set(auth)).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      const refused = await limited.http().get('/api/v1/notes').set(auth);
      expect(refused.body.code).toBe('rate_limited');
      expect(refused.headers['retry-after']).toEqual(expect.any(String));
      // The user's own credentials are not counted against the token.
      expect((await limited.http().get('/api/v1/notes').set(user.auth)).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
