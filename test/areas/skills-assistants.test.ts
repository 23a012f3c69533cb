import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { storeFile } from '../helpers/files';
import { type Harness, startHarness, type TestUser, userNamed } from '../helpers/harness';
import { type FakeModelServer, scriptAnswers, startFakeModel } from '../helpers/openai-server';

/**
 * Skills as assistants (issue 59, acceptance 1): a skill with a model, tools and a knowledge scope,
 * shared with a group through a grant. Through a local OpenAI-format server, which shows the model
 * each call asked for, the system prompt and the tools it was offered.
 */

let fake: FakeModelServer;
let h: Harness;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser;
let admin: TestUser;
const adminId = `root-${randomUUID()}`;

beforeAll(async () => {
  fake = await startFakeModel();
  h = await startHarness({
    MODEL_PROVIDER_BASE_URL: fake.baseUrl,
    MODEL_PROVIDER_MODELS: 'test-model,skill-model,blocked-model',
    BOOTSTRAP_ADMIN_USER_IDS: adminId,
    // The model policy holds on the next request.
    CAPABILITY_CACHE_MS: '0',
    // The background indexer is left idle: the test runs its pass itself.
    KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
  });
  alice = await h.newUser('alice');
  bob = await h.newUser('bob');
  carol = await h.newUser('carol');
  admin = await userNamed(h, adminId);
});
afterAll(async () => {
  await h?.close();
  await fake?.close();
});

const ok = async (res: Response, path: string) => {
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};
const post = async (user: TestUser, path: string, body: Record<string, unknown>) =>
  ok(await h.http().post(path).set(user.auth).send(body), path);
const readSkill = (user: TestUser, skillId: string) => h.http().get('/api/v1/skills').query({ skillId }).set(user.auth);
const listSkills = async (user: TestUser) =>
  (await ok(await h.http().get('/api/v1/skills').query({ limit: 100 }).set(user.auth), 'list')).skills as Array<Record<string, unknown>>;
// Titled: the model-written title of an untitled one would be one more request to the model.
const conversationOf = async (user: TestUser) =>
  (await post(user, '/api/v1/conversations', { title: 'With a skill' })).conversation.conversationId as string;
const send = (user: TestUser, body: Record<string, unknown>) => h.http().post('/api/v1/conversations/messages').set(user.auth).send(body);
const lastRequest = () => fake.requests.at(-1)!.body;
const skillCount = async (user: TestUser) =>
  Number(
    (
      await h.runtime.database.db
        .selectFrom('skills')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('owner_user_id', '=', user.userId)
        .executeTakeFirstOrThrow()
    ).n,
  );

async function groupWith(...members: TestUser[]): Promise<string> {
  const group = await post(admin, '/api/v1/admin/groups', { name: `Team ${randomUUID()}` });
  const groupId = group.group.groupId as string;
  const res = await h
    .http()
    .patch('/api/v1/admin/groups/members')
    .set(admin.auth)
    .send({ groupId, add: members.map((m) => m.userId) });
  await ok(res, 'members');
  return groupId;
}
const grant = (user: TestUser, body: Record<string, unknown>) => post(user, '/api/v1/grants', body);

/** Alice's orchard: a project with a file (shared with the group) and a note (not shared), a file outside it; Bob's own note. */
async function seedKnowledge(groupId: string) {
  const project = (await post(alice, '/api/v1/projects', { name: 'Orchard', description: 'Fruit trees' })).project.projectId as string;
  const inScope = await storeFile(
    h,
    alice,
    'pruning.md',
    'text/markdown',
    Buffer.from('# Pruning apples\n\nPrune the apple trees in late winter, before the buds swell.'),
    { projectId: project },
  );
  const outside = await storeFile(
    h,
    alice,
    'cider.md',
    'text/markdown',
    Buffer.from('# Apple cider\n\nPress the apples after pruning season and let the cider rest.'),
  );
  for (const fileId of [inScope.fileId, outside.fileId]) await post(alice, '/api/v1/files/ingest-document', { fileId });
  // Both files are shared with the group: only the one in the skill's scope may be cited.
  for (const fileId of [inScope.fileId, outside.fileId])
    await grant(alice, { resourceKind: 'file', resourceId: fileId, principalKind: 'group', principalId: groupId, permission: 'read' });
  await post(alice, '/api/v1/notes', { title: 'Apple pruning notes', content: 'Prune apples in winter.', projectId: project });
  await post(bob, '/api/v1/notes', { title: 'My apples', content: 'Pruning apples in my garden.' });
  await h.runtime.indexer.runOnce();
  return { project, inScope: inScope.fileId, outside: outside.fileId };
}

describe('a skill shared with a group (acceptance 1)', () => {
  let groupId: string;
  let skillId: string;
  let files: Awaited<ReturnType<typeof seedKnowledge>>;

  beforeAll(async () => {
    groupId = await groupWith(alice, bob);
    files = await seedKnowledge(groupId);
    const created = await post(alice, '/api/v1/skills', {
      name: 'Orchard assistant',
      instructions: 'You are the orchard assistant. Answer about fruit trees.',
      model: 'skill-model',
      tools: [
        { name: 'knowledge_search', policy: 'approval_required' },
        { name: 'notes_create', policy: 'allow' },
        { name: 'memory_search', policy: 'deny' },
      ],
      knowledgeScope: { projectIds: [files.project] },
      starterPrompts: ['When do I prune apples?'],
    });
    skillId = created.skill.skillId;
    expect(created.skill).toMatchObject({
      model: 'skill-model',
      knowledgeScope: { projectIds: [files.project], fileIds: [] },
      starterPrompts: ['When do I prune apples?'],
      ownerUserId: alice.userId,
      access: 'owner',
    });
    await grant(alice, { resourceKind: 'skill', resourceId: skillId, principalKind: 'group', principalId: groupId, permission: 'use' });
  });

  test('a member lists and reads it, marked as granted for use', async () => {
    const listed = (await listSkills(bob)).find((s) => s.skillId === skillId);
    expect(listed).toMatchObject({ access: 'use', ownerUserId: alice.userId, model: 'skill-model' });
    expect((await readSkill(bob, skillId)).body.skill).toEqual(listed);
  });

  test('a member chats with it: its model, instructions and tools, citations only from its scope', async () => {
    const conversationId = await conversationOf(bob);
    const res = await send(bob, { conversationId, content: 'When should I prune apples?', skillId, knowledge: true });
    expect(res.status).toBe(200);
    const request = lastRequest();
    expect(request.model).toBe('skill-model');
    expect(request.messages[0]).toMatchObject({ role: 'system' });
    expect(request.messages[0]!.content).toMatch(/^You are the orchard assistant\. Answer about fruit trees\./);
    // Denied by the skill: not offered; the others under the stricter policy.
    expect(request.tools?.map((t) => t.function.name).sort()).toEqual(['knowledge_search', 'notes_create']);
    expect(res.body.reply).toMatchObject({ model: 'skill-model', skillId, status: 'complete' });
    const citations = res.body.reply.citations as Array<{ sourceType: string; fileId: string | null }>;
    expect(citations.length).toBeGreaterThan(0);
    // Not Alice's note in the project (Bob cannot read it), nor the shared file outside the scope, nor Bob's note.
    expect(citations.every((c) => c.sourceType === 'file' && c.fileId === files.inScope)).toBe(true);
  });

  test('without the skill, the same chat cites what lies outside its scope', async () => {
    const conversationId = await conversationOf(bob);
    const res = await send(bob, { conversationId, content: 'When should I prune apples?', knowledge: true });
    expect(res.status).toBe(200);
    expect(lastRequest().model).toBe('test-model');
    const cited = (res.body.reply.citations as Array<{ sourceType: string; fileId: string | null }>).map((c) => c.fileId ?? c.sourceType);
    expect(cited).toEqual(expect.arrayContaining([files.outside, 'note']));
    expect(res.body.reply.skillId).toBeNull();
  });

  test('model "skill:<id>" applies it too, and its tools run under the stricter policy', async () => {
    const conversationId = await conversationOf(bob);
    scriptAnswers(fake, { kind: 'tool-calls', calls: [{ id: 'call_1', name: 'knowledge_search', arguments: '{"query":"apples"}' }] });
    const res = await send(bob, { conversationId, content: 'Search for apples.', model: `skill:${skillId}` });
    expect(res.status).toBe(200);
    expect(lastRequest().model).toBe('skill-model');
    // knowledge_search only reads (allowed for Bob), but the skill asks for approval.
    expect(res.body.reply).toMatchObject({ status: 'awaiting_approval', skillId });
    const part = res.body.reply.parts.find((p: { type: string }) => p.type === 'tool-call');
    expect(part).toMatchObject({ toolName: 'knowledge_search', policy: 'approval_required' });
    // Approved, the search tool searches only the skill's scope too.
    const decided = await post(bob, '/api/v1/approvals/decide', { approvalId: part.approvalId, decision: 'approve' });
    const result = decided.reply.parts.find((p: { type: string }) => p.type === 'tool-result');
    const hits = JSON.parse(result.output) as Array<{ source: string; fileId?: string }>;
    expect(hits.length).toBeGreaterThan(0);
    expect(hits.every((hit) => hit.source === 'file' && hit.fileId === files.inScope)).toBe(true);
    const conflicting = await send(bob, { conversationId, content: 'Hi', model: `skill:${skillId}`, skillId: randomUUID() });
    expect(conflicting.status).toBe(400);
  });

  test('a conversation whose model is the skill chats with it; regenerating keeps it', async () => {
    const conversation = await post(bob, '/api/v1/conversations', { title: 'Skill conversation', model: `skill:${skillId}` });
    const conversationId = conversation.conversation.conversationId as string;
    const first = await send(bob, { conversationId, content: 'Hello orchard.' });
    expect(first.status).toBe(200);
    expect(lastRequest().model).toBe('skill-model');
    expect(first.body.reply).toMatchObject({ model: 'skill-model', skillId });
    // A message naming a model goes without the skill.
    const plain = await send(bob, { conversationId, content: 'Hello plainly.', model: 'test-model' });
    expect(plain.body.reply).toMatchObject({ model: 'test-model', skillId: null });
    const again = await post(bob, '/api/v1/conversations/messages/regenerate', { messageId: first.body.reply.messageId });
    expect(again.reply).toMatchObject({ model: 'skill-model', skillId });
    expect(lastRequest().messages[0]!.content).toMatch(/^You are the orchard assistant/);
    const refused = await h
      .http()
      .post('/api/v1/conversations')
      .set(carol.auth)
      .send({ model: `skill:${skillId}` });
    expect(refused.status).toBe(404);
  });

  test('a member cannot change, delete or share it', async () => {
    const patched = await h.http().patch('/api/v1/skills').set(bob.auth).send({ skillId, instructions: 'Mine now.' });
    expect(patched.status).toBe(403);
    const deleted = await h.http().delete('/api/v1/skills').query({ skillId }).set(bob.auth);
    expect(deleted.status).toBe(403);
    const reshared = await h
      .http()
      .post('/api/v1/grants')
      .set(bob.auth)
      .send({ resourceKind: 'skill', resourceId: skillId, principalKind: 'user', principalId: carol.userId, permission: 'use' });
    expect(reshared.status).toBe(403);
    expect((await readSkill(alice, skillId)).body.skill.instructions).toMatch(/^You are the orchard assistant/);
  });

  test('a non-member gets 404 on read, chat, change and delete, and does not list it', async () => {
    expect((await readSkill(carol, skillId)).status).toBe(404);
    expect((await listSkills(carol)).map((s) => s.skillId)).not.toContain(skillId);
    const conversationId = await conversationOf(carol);
    const before = fake.requests.length;
    const chat = await send(carol, { conversationId, content: 'Hi', skillId });
    expect(chat.status).toBe(404);
    expect((await send(carol, { conversationId, content: 'Hi', model: `skill:${skillId}` })).status).toBe(404);
    expect(fake.requests.length).toBe(before);
    expect((await h.http().patch('/api/v1/skills').set(carol.auth).send({ skillId, name: 'x' })).status).toBe(404);
    expect((await h.http().delete('/api/v1/skills').query({ skillId }).set(carol.auth)).status).toBe(404);
  });

  test('/v1 lists it as skill:<id> and completes with its model and instructions', async () => {
    const models = await ok(await h.http().get('/v1/models').set(bob.auth), '/v1/models');
    expect(models.data.map((m: { id: string }) => m.id)).toContain(`skill:${skillId}`);
    const completion = await ok(
      await h
        .http()
        .post('/v1/chat/completions')
        .set(bob.auth)
        .send({ model: `skill:${skillId}`, messages: [{ role: 'user', content: 'Hi' }] }),
      '/v1/chat/completions',
    );
    expect(completion.model).toBe(`skill:${skillId}`);
    expect(lastRequest().model).toBe('skill-model');
    expect(lastRequest().messages[0]).toMatchObject({ role: 'system', content: expect.stringMatching(/^You are the orchard assistant/) });
    const outsider = await h
      .http()
      .post('/v1/chat/completions')
      .set(carol.auth)
      .send({ model: `skill:${skillId}`, messages: [{ role: 'user', content: 'Hi' }] });
    expect(outsider.status).toBe(404);
    expect((await ok(await h.http().get('/v1/models').set(carol.auth), '/v1/models')).data.map((m: { id: string }) => m.id)).not.toContain(
      `skill:${skillId}`,
    );
  });

  test('removing the member from the group revokes it on the next request', async () => {
    const conversationId = await conversationOf(bob);
    await ok(
      await h
        .http()
        .patch('/api/v1/admin/groups/members')
        .set(admin.auth)
        .send({ groupId, remove: [bob.userId] }),
      'remove member',
    );
    expect((await readSkill(bob, skillId)).status).toBe(404);
    expect((await listSkills(bob)).map((s) => s.skillId)).not.toContain(skillId);
    expect((await send(bob, { conversationId, content: 'Hi', skillId })).status).toBe(404);
  });
});

describe('skills granted to edit, and what a skill may name', () => {
  test('an edit grantee changes it (checked as the owner) but cannot delete it', async () => {
    const { skill } = await post(alice, '/api/v1/skills', { name: `Editable ${randomUUID()}` });
    await grant(alice, {
      resourceKind: 'skill',
      resourceId: skill.skillId,
      principalKind: 'user',
      principalId: bob.userId,
      permission: 'edit',
    });
    const changed = await h.http().patch('/api/v1/skills').set(bob.auth).send({ skillId: skill.skillId, instructions: 'Be brief.' });
    expect(changed.status).toBe(200);
    expect(changed.body.skill).toMatchObject({ instructions: 'Be brief.', access: 'edit', ownerUserId: alice.userId });
    // Bob's own project is not Alice's to read: the scope is checked as the owner's.
    const bobsProject = (await post(bob, '/api/v1/projects', { name: 'Mine' })).project.projectId;
    const scoped = await h
      .http()
      .patch('/api/v1/skills')
      .set(bob.auth)
      .send({ skillId: skill.skillId, knowledgeScope: { projectIds: [bobsProject] } });
    expect(scoped.status).toBe(404);
    expect((await h.http().delete('/api/v1/skills').query({ skillId: skill.skillId }).set(bob.auth)).status).toBe(403);
    expect((await readSkill(alice, skill.skillId)).body.skill).toMatchObject({ instructions: 'Be brief.', knowledgeScope: null });
  });

  test('a read grantee sees it but cannot chat with it', async () => {
    const { skill } = await post(alice, '/api/v1/skills', { name: `Readable ${randomUUID()}` });
    await grant(alice, {
      resourceKind: 'skill',
      resourceId: skill.skillId,
      principalKind: 'user',
      principalId: carol.userId,
      permission: 'read',
    });
    expect((await readSkill(carol, skill.skillId)).body.skill.access).toBe('read');
    const conversationId = await conversationOf(carol);
    expect((await send(carol, { conversationId, content: 'Hi', skillId: skill.skillId })).status).toBe(404);
  });

  test('bad input is a 400 or 404 and creates or changes nothing', async () => {
    const before = await skillCount(alice);
    const carolsProject = (await post(carol, '/api/v1/projects', { name: 'Private' })).project.projectId;
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ tools: [{ name: 'no_such_tool', policy: 'allow' }] }, 400, '/body/tools/0/name'],
      [
        {
          tools: [
            { name: 'notes_search', policy: 'allow' },
            { name: 'notes_search', policy: 'deny' },
          ],
        },
        400,
        '/body/tools/1/name',
      ],
      [{ tools: [{ name: 'notes_search', policy: 'sometimes' }] }, 400, '/body/tools/0/policy'],
      [{ knowledgeScope: { projectIds: [carolsProject] } }, 404, '/body/knowledgeScope/projectIds/0'],
      [{ knowledgeScope: { fileIds: [randomUUID()] } }, 404, '/body/knowledgeScope/fileIds/0'],
      [{ starterPrompts: ['a', 'b', 'c', 'd', 'e'] }, 400, '/body/starterPrompts'],
      [{ starterPrompts: ['x'.repeat(201)] }, 400, '/body/starterPrompts/0'],
      [{ model: 'no-such-model' }, 400, '/body/model'],
    ];
    for (const [extra, status, path] of cases) {
      const res = await h
        .http()
        .post('/api/v1/skills')
        .set(alice.auth)
        .send({ name: `Bad ${randomUUID()}`, ...extra });
      expect({ extra, status: res.status }).toEqual({ extra, status });
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    expect(await skillCount(alice)).toBe(before);
    const { skill } = await post(alice, '/api/v1/skills', { name: `Good ${randomUUID()}`, starterPrompts: ['Hi'] });
    const bad = await h
      .http()
      .patch('/api/v1/skills')
      .set(alice.auth)
      .send({ skillId: skill.skillId, tools: [{ name: 'no_such_tool', policy: 'allow' }], starterPrompts: [] });
    expect(bad.status).toBe(400);
    expect((await readSkill(alice, skill.skillId)).body.skill).toMatchObject({ tools: [], starterPrompts: ['Hi'] });
  });

  test("a skill's blocked model is refused to the chatting user, not replaced", async () => {
    const { skill } = await post(alice, '/api/v1/skills', { name: `Blocked ${randomUUID()}`, model: 'blocked-model' });
    await ok(
      await h
        .http()
        .patch('/api/v1/admin/model-policy')
        .set(admin.auth)
        .send({ block: ['blocked-model'] }),
      'policy',
    );
    try {
      const conversationId = await conversationOf(alice);
      const before = fake.requests.length;
      const res = await send(alice, { conversationId, content: 'Hi', skillId: skill.skillId });
      expect(res.status).toBe(400);
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain('/body/skillId');
      expect(fake.requests.length).toBe(before);
    } finally {
      await ok(await h.http().patch('/api/v1/admin/model-policy').set(admin.auth).send({ block: [] }), 'policy');
    }
  });

  test("another user's skill is 404 to read, change, delete and chat with", async () => {
    const { skill } = await post(alice, '/api/v1/skills', { name: `Private ${randomUUID()}` });
    expect((await readSkill(carol, skill.skillId)).status).toBe(404);
    expect((await h.http().patch('/api/v1/skills').set(carol.auth).send({ skillId: skill.skillId, name: 'x' })).status).toBe(404);
    expect((await h.http().delete('/api/v1/skills').send({ skillId: skill.skillId }).set(carol.auth)).status).toBe(404);
    const conversationId = await conversationOf(carol);
    expect((await send(carol, { conversationId, content: 'Hi', skillId: skill.skillId })).status).toBe(404);
    expect((await readSkill(alice, skill.skillId)).status).toBe(200);
  });
});
