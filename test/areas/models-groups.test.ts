import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { uuidv7 } from '../../src/platform/ids';
import { signDevToken } from '../../src/platform/tokens';
import { type TestUser, useHarnessWith, userNamed } from '../helpers/harness';
import { type FakeModelServer, startFakeModel } from '../helpers/openai-server';

// Model policy per group on top of the deployment's, the deployment's models and connections an
// admin shares (private to their grantees), through GET /api/v1/models, chat and /v1.
const ROOT = `root-${randomUUID()}`;
const KEY = 'sk-shared-7a6b5c4d3e2f';
let deployment: FakeModelServer;
let shared: FakeModelServer;
beforeAll(async () => {
  [deployment, shared] = await Promise.all([startFakeModel(), startFakeModel()]);
  shared.catalogue = { models: ['shared-chat', 'shared-embed-small'], embeddingDimensions: 8, requiredKey: KEY };
});
afterAll(async () => {
  await Promise.all([deployment?.close(), shared?.close()]);
});

const ctx = useHarnessWith(
  () => ({
    BOOTSTRAP_ADMIN_USER_IDS: ROOT,
    OUTBOUND_ALLOW_LOOPBACK: 'true',
    MODEL_PROVIDER_BASE_URL: deployment.baseUrl,
    MODEL_PROVIDER_MODELS: 'model-a,model-b,model-c',
    CAPABILITY_CACHE_MS: '0',
  }),
  'alice',
  'bob',
);
const db = () => ctx.h.runtime.database.db;
const admin = () => userNamed(ctx.h, ROOT);

const client = (user: TestUser) => new OpenAI({ baseURL: `${ctx.h.baseUrl}/v1`, apiKey: user.token, maxRetries: 0 });

/** The model ids GET /api/v1/models lists for `user`. */
async function listed(user: TestUser): Promise<string[]> {
  const res = await ctx.h.http().get('/api/v1/models').set(user.auth).expect(200);
  return res.body.models.map((m: { modelId: string }) => m.modelId);
}

/** The ids /v1/models lists for `user`. */
const listedV1 = async (user: TestUser) => (await client(user).models.list()).data.map((m) => m.id);

/** The status of a chat turn with `model`, and the refusal's detail. */
async function chat(user: TestUser, model: string): Promise<{ status: number; detail?: string }> {
  const conversationId = (await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({}).expect(200)).body.conversation
    .conversationId;
  const res = await ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send({ conversationId, content: 'Hi', model });
  return { status: res.status, detail: res.body.details?.[0]?.message };
}

/** The status of a /v1 chat completion with `model` (404 and its message when refused). */
async function complete(user: TestUser, model: string): Promise<{ status: number; message?: string }> {
  try {
    await client(user).chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] });
    return { status: 200 };
  } catch (error) {
    if (!(error instanceof OpenAI.APIError)) throw error;
    return { status: error.status as number, message: error.message };
  }
}

async function newGroup(members: string[]): Promise<string> {
  const root = await admin();
  const groupId = (
    await ctx.h
      .http()
      .post('/api/v1/admin/groups')
      .set(root.auth)
      .send({ name: `team-${randomUUID()}` })
      .expect(200)
  ).body.group.groupId as string;
  if (members.length > 0)
    await ctx.h.http().patch('/api/v1/admin/groups/members').set(root.auth).send({ groupId, add: members }).expect(200);
  return groupId;
}

const members = async (groupId: string, change: { add?: string[]; remove?: string[] }) =>
  ctx.h
    .http()
    .patch('/api/v1/admin/groups/members')
    .set((await admin()).auth)
    .send({ groupId, ...change })
    .expect(200);

const setPolicy = async (groupId: string, lists: { allow?: string[] | null; block?: string[] }) =>
  (
    await ctx.h
      .http()
      .patch('/api/v1/admin/groups/model-policy')
      .set((await admin()).auth)
      .send({ groupId, ...lists })
      .expect(200)
  ).body.policy;

/** Shares a deployment model or a connection with `use` (as the admin): the grant's id. */
async function grant(kind: 'model' | 'connection', resourceId: string, principal: { user?: string; group?: string }): Promise<string> {
  const res = await ctx.h
    .http()
    .post('/api/v1/grants')
    .set((await admin()).auth)
    .send({
      resourceKind: kind,
      resourceId,
      principalKind: principal.user ? 'user' : 'group',
      principalId: principal.user ?? principal.group,
      permission: 'use',
    })
    .expect(200);
  return res.body.grant.grantId as string;
}

const revoke = async (grantId: string) =>
  ctx.h
    .http()
    .delete('/api/v1/grants')
    .set((await admin()).auth)
    .send({ grantId })
    .expect(200);

describe('model policy per group', () => {
  test('an allow list narrows its members’ models everywhere; users in no such group keep the deployment’s', async () => {
    const member = await ctx.h.newUser('allowed');
    const groupId = await newGroup([member.userId]);
    const policy = await setPolicy(groupId, { allow: ['model-a'] });
    expect(policy).toMatchObject({ groupId, allow: ['model-a'], block: [], updatedBy: ROOT });

    expect(await listed(member)).toEqual(['model-a']);
    expect(await listed(ctx.bob)).toEqual(['model-a', 'model-b', 'model-c']);
    expect(await chat(member, 'model-a')).toEqual({ status: 200, detail: undefined });
    expect(await chat(member, 'model-b')).toEqual({ status: 400, detail: "your groups' model policies do not allow this model" });
    expect((await chat(ctx.bob, 'model-b')).status).toBe(200);

    // /v1: the deployment's embedder is a model too, and the allow list does not name it.
    expect(await listedV1(member)).toEqual(['model-a']);
    expect(await listedV1(ctx.bob)).toEqual(['model-a', 'model-b', 'model-c', 'builtin-hashing']);
    expect(await complete(member, 'model-a')).toEqual({ status: 200 });
    const refused = await complete(member, 'model-b');
    expect(refused.status).toBe(404);
    expect(refused.message).toMatch(/groups' model policies do not allow this model/);
    const embedding = await client(member)
      .embeddings.create({ model: 'builtin-hashing', input: 'x' })
      .catch((error: unknown) => error);
    expect((embedding as InstanceType<typeof OpenAI.APIError>).status).toBe(404);
    expect((await client(ctx.bob).embeddings.create({ model: 'builtin-hashing', input: 'x' })).data).toHaveLength(1);
  });

  test('groups grant: a model passes when one of the member’s groups passes it; the deployment’s policy comes first', async () => {
    const member = await ctx.h.newUser('two-groups');
    const narrow = await newGroup([member.userId]);
    const wide = await newGroup([member.userId]);
    await setPolicy(narrow, { allow: ['model-a'] });
    await setPolicy(wide, { block: ['model-a', 'model-c'] });
    // model-a passes the first, model-b the second, model-c neither.
    expect(await listed(member)).toEqual(['model-a', 'model-b']);
    expect((await chat(member, 'model-c')).status).toBe(400);
    // Automations choose their model the same way.
    const automation = (model: string) =>
      ctx.h
        .http()
        .post('/api/v1/automations')
        .set(member.auth)
        .send({ name: `Daily ${model}`, prompt: 'p', model });
    expect((await automation('model-c')).status).toBe(400);
    expect((await automation('model-b')).status).toBe(200);
    const dry = await ctx.h.http().post('/api/v1/automations/test').set(member.auth).send({ name: 'Dry', prompt: 'p', model: 'model-c' });
    expect(dry.body).toMatchObject({ valid: false, errors: [{ field: '/model', code: 'model_not_allowed' }] });

    const root = await admin();
    await ctx.h
      .http()
      .patch('/api/v1/admin/model-policy')
      .set(root.auth)
      .send({ block: ['model-a'] })
      .expect(200);
    try {
      expect(await listed(member)).toEqual(['model-b']);
      expect(await chat(member, 'model-a')).toEqual({ status: 400, detail: "the deployment's model policy blocks this model" });
    } finally {
      await ctx.h.http().patch('/api/v1/admin/model-policy').set(root.auth).send({ block: [] }).expect(200);
    }
  });

  test('a membership change or a policy removed holds on the next request', async () => {
    const member = await ctx.h.newUser('moving');
    const groupId = await newGroup([member.userId]);
    await setPolicy(groupId, { block: ['model-b'] });
    expect(await listed(member)).toEqual(['model-a', 'model-c']);
    await members(groupId, { remove: [member.userId] });
    expect(await listed(member)).toEqual(['model-a', 'model-b', 'model-c']);
    await members(groupId, { add: [member.userId] });
    expect((await chat(member, 'model-b')).status).toBe(400);

    const root = await admin();
    const deleted = await ctx.h.http().delete('/api/v1/admin/groups/model-policy').set(root.auth).send({ groupId }).expect(200);
    expect(deleted.body).toEqual({ groupId, deleted: true });
    expect((await chat(member, 'model-b')).status).toBe(200);
    const audit = await db()
      .selectFrom('audit_events')
      .select(['action', 'actor_user_id'])
      .where('resource_id', '=', groupId)
      .where('action', 'like', 'administration.group.model_policy.%')
      .orderBy('id')
      .execute();
    expect(audit).toEqual([
      { action: 'administration.group.model_policy.update', actor_user_id: ROOT },
      { action: 'administration.group.model_policy.delete', actor_user_id: ROOT },
    ]);
  });
});

describe('the admin routes of group model policies', () => {
  test('read one, list, change one list keeping the other; deleting the group deletes its policy', async () => {
    const root = await admin();
    const groupId = await newGroup([]);
    await setPolicy(groupId, { allow: ['model-a', 'model-b'] });
    const changed = await setPolicy(groupId, { block: ['model-b'] });
    expect(changed).toMatchObject({ allow: ['model-a', 'model-b'], block: ['model-b'] });
    const read = await ctx.h.http().get('/api/v1/admin/groups/model-policy').query({ groupId }).set(root.auth).expect(200);
    expect(read.body.policy).toEqual(changed);
    const page = await ctx.h.http().get('/api/v1/admin/groups/model-policy').query({ limit: 200 }).set(root.auth).expect(200);
    expect(page.body.policies).toContainEqual(changed);

    await ctx.h.http().delete('/api/v1/admin/groups').set(root.auth).send({ groupId }).expect(200);
    expect((await ctx.h.http().get('/api/v1/admin/groups/model-policy').query({ groupId }).set(root.auth)).status).toBe(404);
    expect(await db().selectFrom('group_model_policies').select('group_id').where('group_id', '=', groupId).execute()).toEqual([]);
  });

  test('bad input is a 400 and changes nothing; an unknown group or a group without a policy is a 404', async () => {
    const root = await admin();
    const groupId = await newGroup([]);
    await setPolicy(groupId, { allow: ['model-a'] });
    for (const body of [
      { groupId },
      { allow: ['model-b'] },
      { groupId, allow: 'model-b' },
      { groupId, allow: [''] },
      { groupId, block: null },
      { groupId, allow: ['model-b', 'model-b'] },
      { groupId, block: ['x'], extra: 1 },
      { groupId, userId: ROOT },
    ]) {
      const res = await ctx.h.http().patch('/api/v1/admin/groups/model-policy').set(root.auth).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    const read = await ctx.h.http().get('/api/v1/admin/groups/model-policy').query({ groupId }).set(root.auth).expect(200);
    expect(read.body.policy).toMatchObject({ allow: ['model-a'], block: [] });

    const unknown = uuidv7();
    const patched = await ctx.h
      .http()
      .patch('/api/v1/admin/groups/model-policy')
      .set(root.auth)
      .send({ groupId: unknown, block: ['x'] });
    expect(patched.status).toBe(404);
    expect(patched.body.code).toBe('not_found');
    expect((await ctx.h.http().get('/api/v1/admin/groups/model-policy').query({ groupId: unknown }).set(root.auth)).status).toBe(404);
    const bare = await newGroup([]);
    expect((await ctx.h.http().get('/api/v1/admin/groups/model-policy').query({ groupId: bare }).set(root.auth)).status).toBe(404);
    expect((await ctx.h.http().delete('/api/v1/admin/groups/model-policy').set(root.auth).send({ groupId: bare })).status).toBe(404);
    expect((await ctx.h.http().delete('/api/v1/admin/groups/model-policy').set(root.auth).send({})).status).toBe(400);
    expect(
      await db()
        .selectFrom('audit_events')
        .select('id')
        .where('resource_id', 'in', [unknown, bare])
        .where('action', 'like', 'administration.group.model_policy.%')
        .where('outcome', '=', 'success')
        .execute(),
    ).toEqual([]);
  });

  test('a user without the role reads and changes nothing', async () => {
    const groupId = await newGroup([ctx.alice.userId]);
    await setPolicy(groupId, { allow: ['model-a'] });
    expect((await ctx.h.http().get('/api/v1/admin/groups/model-policy').set(ctx.alice.auth)).status).toBe(403);
    expect((await ctx.h.http().patch('/api/v1/admin/groups/model-policy').set(ctx.alice.auth).send({ groupId, allow: null })).status).toBe(
      403,
    );
    expect((await ctx.h.http().delete('/api/v1/admin/groups/model-policy').set(ctx.alice.auth).send({ groupId })).status).toBe(403);
    expect(await listed(ctx.alice)).toEqual(['model-a']);
    await ctx.h
      .http()
      .delete('/api/v1/admin/groups/model-policy')
      .set((await admin()).auth)
      .send({ groupId })
      .expect(200);
  });
});

describe('private models and shared connections', () => {
  test('a deployment model with a grant is reachable by its grantees only, and leaves a removed member at once', async () => {
    const member = await ctx.h.newUser('grantee');
    const direct = await ctx.h.newUser('direct');
    const groupId = await newGroup([member.userId]);
    const grants = [await grant('model', 'model-c', { group: groupId }), await grant('model', 'model-c', { user: direct.userId })];
    try {
      for (const user of [member, direct]) {
        expect(await listed(user)).toEqual(['model-a', 'model-b', 'model-c']);
        expect((await chat(user, 'model-c')).status).toBe(200);
        expect(await complete(user, 'model-c')).toEqual({ status: 200 });
      }
      // Another user: the model does not exist for them.
      expect(await listed(ctx.bob)).toEqual(['model-a', 'model-b']);
      expect(await listedV1(ctx.bob)).not.toContain('model-c');
      const refused = await chat(ctx.bob, 'model-c');
      expect(refused.status).toBe(400);
      expect(refused.detail).toMatch(/^must be one of the available models: model-a, model-b$/);
      expect((await complete(ctx.bob, 'model-c')).status).toBe(404);

      await members(groupId, { remove: [member.userId] });
      expect(await listed(member)).toEqual(['model-a', 'model-b']);
      expect((await complete(member, 'model-c')).status).toBe(404);
    } finally {
      for (const grantId of grants) await revoke(grantId);
    }
    expect(await listed(ctx.bob)).toEqual(['model-a', 'model-b', 'model-c']);
  });

  test('the deployment’s embedder made private is refused to others on /v1', async () => {
    const grantId = await grant('model', 'builtin-hashing', { user: ctx.alice.userId });
    try {
      expect(await listedV1(ctx.alice)).toContain('builtin-hashing');
      expect(await listedV1(ctx.bob)).not.toContain('builtin-hashing');
      expect((await client(ctx.alice).embeddings.create({ model: 'builtin-hashing', input: 'x' })).data).toHaveLength(1);
      const refused = await client(ctx.bob)
        .embeddings.create({ model: 'builtin-hashing', input: 'x' })
        .catch((error: unknown) => error);
      expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(404);
    } finally {
      await revoke(grantId);
    }
  });

  test('a connection an admin shares serves its grantees’ chat (not its embeddings); deleting it forgets its grants', async () => {
    const root = await admin();
    const created = await ctx.h
      .http()
      .post('/api/v1/model-providers')
      .set(root.auth)
      .send({ kind: 'openai_compatible', name: 'Team key', baseUrl: shared.baseUrl, apiKey: KEY });
    expect(created.status).toBe(200);
    const connectionId = created.body.connection.connectionId as string;
    await ctx.h.http().post('/api/v1/model-providers/test').set(root.auth).send({ connectionId }).expect(200);
    const member = await ctx.h.newUser('shared');
    const groupId = await newGroup([member.userId]);
    await grant('connection', connectionId, { group: groupId });

    const model = `${connectionId}/shared-chat`;
    expect(await listed(member)).toEqual(['model-a', 'model-b', 'model-c', model]);
    expect(await listedV1(member)).toEqual(['model-a', 'model-b', 'model-c', 'builtin-hashing', model]);
    const before = shared.requests.length;
    expect(await complete(member, model)).toEqual({ status: 200 });
    expect(shared.requests.slice(before)).toEqual([expect.objectContaining({ authorization: `Bearer ${KEY}` })]);
    expect((await chat(member, model)).status).toBe(200);
    // Its embeddings stay its owner's.
    const embedding = await client(member)
      .embeddings.create({ model: `${connectionId}/shared-embed-small`, input: 'x' })
      .catch((error: unknown) => error);
    expect((embedding as InstanceType<typeof OpenAI.APIError>).status).toBe(404);
    expect(await listed(root)).toContain(`${connectionId}/shared-embed-small`);
    // Another user, and the connection's management: its owner's alone.
    expect(await listed(ctx.bob)).not.toContain(model);
    expect((await complete(ctx.bob, model)).status).toBe(404);
    expect((await ctx.h.http().get('/api/v1/model-providers').query({ connectionId }).set(member.auth)).status).toBe(404);
    expect((await ctx.h.http().delete('/api/v1/model-providers').set(member.auth).send({ connectionId })).status).toBe(404);

    await ctx.h.http().delete('/api/v1/model-providers').set(root.auth).send({ connectionId }).expect(200);
    expect(await db().selectFrom('access_grants').select('id').where('resource_id', '=', connectionId).execute()).toEqual([]);
    expect(await listed(member)).toEqual(['model-a', 'model-b', 'model-c']);
  });

  test('admins share the deployment’s models and their own connections; others, bad input and the unknown change nothing', async () => {
    const root = await admin();
    const share = (user: TestUser, body: Record<string, unknown>) =>
      ctx.h
        .http()
        .post('/api/v1/grants')
        .set(user.auth)
        .send({ principalKind: 'user', principalId: ctx.bob.userId, permission: 'use', ...body });
    const connectionOf = async (user: TestUser) =>
      (
        await ctx.h
          .http()
          .post('/api/v1/model-providers')
          .set(user.auth)
          .send({ kind: 'openai_compatible', name: 'Mine', baseUrl: shared.baseUrl, apiKey: KEY })
          .expect(200)
      ).body.connection.connectionId as string;
    const alicesOwn = await connectionOf(ctx.alice);
    for (const [user, body, status] of [
      [ctx.alice, { resourceKind: 'model', resourceId: 'model-b' }, 404],
      [ctx.alice, { resourceKind: 'connection', resourceId: alicesOwn }, 404],
      [root, { resourceKind: 'connection', resourceId: alicesOwn }, 404],
      [root, { resourceKind: 'model', resourceId: 'no-such-model' }, 404],
      [root, { resourceKind: 'connection', resourceId: uuidv7() }, 404],
      [root, { resourceKind: 'model', resourceId: 'model-b', permission: 'read' }, 400],
      [root, { resourceKind: 'model', resourceId: 'model-b', permission: 'edit' }, 400],
    ] as const) {
      expect((await share(user, body)).status).toBe(status);
    }
    expect(await db().selectFrom('access_grants').select('id').where('principal_id', '=', ctx.bob.userId).execute()).toEqual([]);
    expect(await listed(ctx.bob)).toEqual(['model-a', 'model-b', 'model-c']);

    const given = await share(root, { resourceKind: 'model', resourceId: 'model-b' });
    expect(given.status).toBe(200);
    expect(given.body.grant).toMatchObject({ resourceKind: 'model', resourceId: 'model-b', permission: 'use', grantedBy: ROOT });
    expect(await listed(ctx.bob)).toEqual(['model-a', 'model-b', 'model-c']);
    expect(await listed(ctx.alice)).toEqual(['model-a', 'model-c']);
    // The grantee may end their own grant: the model is everyone's again.
    await ctx.h.http().delete('/api/v1/grants').set(ctx.bob.auth).send({ grantId: given.body.grant.grantId }).expect(200);
    expect(await listed(ctx.alice)).toEqual(['model-a', 'model-b', 'model-c']);
  });
});

describe('groups from the identity provider’s claim', () => {
  const claimCtx = useHarnessWith(() => ({ AUTH_GROUPS_CLAIM: 'groups', BOOTSTRAP_ADMIN_USER_IDS: ROOT }));
  const h = () => claimCtx.h;
  const tokenWith = async (userId: string, groups: unknown): Promise<TestUser> => {
    const token = await signDevToken(h().runtime.devAuth!, userId, 3600, groups === undefined ? {} : { groups });
    return { ...(await h().newUser('unused')), userId, token, auth: { Authorization: `Bearer ${token}` } };
  };
  const membershipsOf = (userId: string) =>
    h()
      .runtime.database.db.selectFrom('group_members as m')
      .innerJoin('groups as g', 'g.id', 'm.group_id')
      .select(['g.name', 'g.source as groupSource', 'm.source'])
      .where('m.user_id', '=', userId)
      .orderBy('g.name')
      .execute();
  const syncs = (userId: string) =>
    h()
      .runtime.database.db.selectFrom('audit_events')
      .select('metadata')
      .where('actor_user_id', '=', userId)
      .where('action', '=', 'group.identity_provider.sync')
      .execute();
  const signIn = async (user: TestUser) => h().http().get('/api/v1/models').set(user.auth).expect(200);

  test('the claim makes missing groups and memberships, then removes those it no longer carries; manual ones stay', async () => {
    const userId = `idp-${randomUUID()}`;
    const suffix = randomUUID().slice(0, 8);
    const root = await userNamed(h(), ROOT);
    const manual = (
      await h()
        .http()
        .post('/api/v1/admin/groups')
        .set(root.auth)
        .send({ name: `Manual ${suffix}` })
        .expect(200)
    ).body.group.groupId as string;
    await h()
      .http()
      .patch('/api/v1/admin/groups/members')
      .set(root.auth)
      .send({ groupId: manual, add: [userId] })
      .expect(200);

    await signIn(await tokenWith(userId, [`Research ${suffix}`, `  Sales ${suffix} `, `research ${suffix}`, 7, '']));
    expect(await membershipsOf(userId)).toEqual([
      { name: `Manual ${suffix}`, groupSource: 'manual', source: 'manual' },
      { name: `Research ${suffix}`, groupSource: 'identity_provider', source: 'identity_provider' },
      { name: `Sales ${suffix}`, groupSource: 'identity_provider', source: 'identity_provider' },
    ]);
    expect(await syncs(userId)).toHaveLength(1);

    // The same claim in a new token writes nothing; a string is one name; the manual group named
    // by the claim keeps the manual membership.
    await signIn(await tokenWith(userId, [`Sales ${suffix}`, `Research ${suffix}`]));
    expect(await syncs(userId)).toHaveLength(1);
    await signIn(await tokenWith(userId, `Manual ${suffix}`));
    expect(await membershipsOf(userId)).toEqual([{ name: `Manual ${suffix}`, groupSource: 'manual', source: 'manual' }]);
    expect(await syncs(userId)).toHaveLength(2);

    // Another user's claim joins the group the first one's made; no claim is no groups.
    const otherId = `idp-${randomUUID()}`;
    await signIn(await tokenWith(otherId, [`Research ${suffix}`]));
    const research = await h().runtime.database.db.selectFrom('groups').select('id').where('name', '=', `Research ${suffix}`).execute();
    expect(research).toHaveLength(1);
    expect(await membershipsOf(otherId)).toEqual([
      { name: `Research ${suffix}`, groupSource: 'identity_provider', source: 'identity_provider' },
    ]);
    await signIn(await tokenWith(otherId, undefined));
    expect(await membershipsOf(otherId)).toEqual([]);
    // The first user's manual membership was never the claim's to remove.
    await signIn(await tokenWith(userId, []));
    expect(await membershipsOf(userId)).toEqual([{ name: `Manual ${suffix}`, groupSource: 'manual', source: 'manual' }]);
  });

  test('requests arriving at once with a new claim match it once', async () => {
    const userId = `idp-${randomUUID()}`;
    const names = [`Burst ${randomUUID()}`, `Burst ${randomUUID()}`];
    const user = await tokenWith(userId, names);
    await Promise.all(Array.from({ length: 8 }, () => signIn(user)));
    expect((await membershipsOf(userId)).map((m) => m.name)).toEqual([...names].sort());
    expect(await syncs(userId)).toHaveLength(1);
  });

  test('a claim group’s model policy applies to its members’ models and media from their next request', async () => {
    const userId = `idp-${randomUUID()}`;
    const name = `Policy ${randomUUID()}`;
    const member = await tokenWith(userId, [name]);
    await signIn(member);
    const root = await userNamed(h(), ROOT);
    const groupId = (await h().runtime.database.db.selectFrom('groups').select('id').where('name', '=', name).executeTakeFirstOrThrow()).id;
    await h()
      .http()
      .patch('/api/v1/admin/groups/model-policy')
      .set(root.auth)
      .send({ groupId, block: ['development-image'] })
      .expect(200);
    const modelsOf = async (user: TestUser) =>
      (await h().http().get('/api/v1/models').set(user.auth).expect(200)).body.models.map((m: { modelId: string }) => m.modelId);
    expect(await modelsOf(member)).toEqual(['development', 'development-transcription', 'development-speech']);
    const image = await h()
      .http()
      .post('/api/v1/media/images')
      .set(member.auth)
      .send({ prompt: 'A lighthouse', model: 'development-image' });
    expect(image.status).toBe(400);
    expect(image.body.details).toEqual([{ path: '/body/model', message: "your groups' model policies do not allow this model" }]);

    // A token whose claim no longer names the group: the policy no longer applies.
    const outside = await tokenWith(userId, []);
    expect(await modelsOf(outside)).toEqual(['development', 'development-image', 'development-transcription', 'development-speech']);
    const made = await h()
      .http()
      .post('/api/v1/media/images')
      .set(outside.auth)
      .send({ prompt: 'A lighthouse', model: 'development-image' });
    expect(made.status).toBe(200);
  });
});
