import { type TestUser, useHarness } from '../helpers/harness';
import { describeCrudContract } from '../helpers/crud-contract';

const ctx = useHarness('alice', 'bob');

async function create(user: TestUser, body: Record<string, unknown>) {
  const res = await ctx.h.http().post('/api/v1/projects').set(user.auth).send(body);
  expect(res.status).toBe(200);
  return res.body.project as { projectId: string; parentId: string | null; name: string };
}

describe('projects', () => {
  test('create, then list and read it back with the typed client', async () => {
    const { data, error } = await ctx.alice.api.POST('/api/v1/projects', {
      body: { name: 'Thesis', description: 'Chapter 3', instructions: 'Cite sources.', color: '#3366ff' },
    });
    expect(error).toBeUndefined();
    const project = data!.project;
    expect(project).toMatchObject({ name: 'Thesis', description: 'Chapter 3', color: '#3366ff', parentId: null, clientId: null });
    expect(typeof project.createdAt).toBe('number');

    const list = await ctx.alice.api.GET('/api/v1/projects', {});
    expect(list.data && 'projects' in list.data && list.data.projects.map((p) => p.projectId)).toContain(project.projectId);
    const one = await ctx.alice.api.GET('/api/v1/projects', { params: { query: { projectId: project.projectId } } });
    expect(one.data && 'project' in one.data && one.data.project.name).toBe('Thesis');
  });

  test('create is idempotent per user on clientId', async () => {
    const first = await create(ctx.alice, { name: 'Inbox', clientId: 'web-1' });
    const again = await create(ctx.alice, { name: 'Something else', clientId: 'web-1' });
    expect(again.projectId).toBe(first.projectId);
    expect(again.name).toBe('Inbox');
    const concurrent = await Promise.all(
      Array.from({ length: 5 }, () =>
        ctx.h.http().post('/api/v1/projects').set(ctx.alice.auth).send({ name: 'Race', clientId: 'web-race' }),
      ),
    );
    expect(new Set(concurrent.map((r) => r.body.project.projectId)).size).toBe(1);
    // The same clientId is independent per user.
    const bobs = await create(ctx.bob, { name: 'Inbox', clientId: 'web-1' });
    expect(bobs.projectId).not.toBe(first.projectId);
  });

  test('parentId must be one of the caller’s projects', async () => {
    const bobsProject = await create(ctx.bob, { name: 'Bob root' });
    const res = await ctx.h.http().post('/api/v1/projects').set(ctx.alice.auth).send({ name: 'Child', parentId: bobsProject.projectId });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
    const parent = await create(ctx.alice, { name: 'Parent' });
    const child = await create(ctx.alice, { name: 'Child', parentId: parent.projectId });
    expect(child.parentId).toBe(parent.projectId);
    const children = await ctx.h.http().get('/api/v1/projects').query({ parentId: parent.projectId }).set(ctx.alice.auth);
    expect(children.body.projects.map((p: { projectId: string }) => p.projectId)).toEqual([child.projectId]);
  });

  test('a move that would create a cycle is 409 and changes nothing', async () => {
    const a = await create(ctx.alice, { name: 'A' });
    const b = await create(ctx.alice, { name: 'B', parentId: a.projectId });
    const c = await create(ctx.alice, { name: 'C', parentId: b.projectId });
    for (const parentId of [a.projectId, c.projectId]) {
      const res = await ctx.h.http().patch('/api/v1/projects').set(ctx.alice.auth).send({ projectId: a.projectId, parentId });
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('conflict');
    }
    const after = await ctx.h.http().get('/api/v1/projects').query({ projectId: a.projectId }).set(ctx.alice.auth);
    expect(after.body.project.parentId).toBeNull();
    // Moving C to the top level and then A under C is fine.
    const moveC = await ctx.h.http().patch('/api/v1/projects').set(ctx.alice.auth).send({ projectId: c.projectId, parentId: null });
    expect(moveC.body.project.parentId).toBeNull();
    const moveA = await ctx.h.http().patch('/api/v1/projects').set(ctx.alice.auth).send({ projectId: a.projectId, parentId: c.projectId });
    expect(moveA.status).toBe(200);
    expect(moveA.body.project.parentId).toBe(c.projectId);
  });

  test('concurrent opposite moves never leave a cycle', async () => {
    const x = await create(ctx.alice, { name: 'X' });
    const y = await create(ctx.alice, { name: 'Y' });
    const [one, two] = await Promise.all([
      ctx.h.http().patch('/api/v1/projects').set(ctx.alice.auth).send({ projectId: x.projectId, parentId: y.projectId }),
      ctx.h.http().patch('/api/v1/projects').set(ctx.alice.auth).send({ projectId: y.projectId, parentId: x.projectId }),
    ]);
    expect([one.status, two.status].sort()).toEqual([200, 409]);
  });

  test('a project with sub-projects is not deleted; its notes are kept when it is', async () => {
    const parent = await create(ctx.alice, { name: 'P' });
    const child = await create(ctx.alice, { name: 'Q', parentId: parent.projectId });
    const refused = await ctx.h.http().delete('/api/v1/projects').query({ projectId: parent.projectId }).set(ctx.alice.auth);
    expect(refused.status).toBe(409);
    const note = await ctx.h.http().post('/api/v1/notes').set(ctx.alice.auth).send({ title: 'kept', projectId: child.projectId });
    const deleted = await ctx.h.http().delete('/api/v1/projects').send({ projectId: child.projectId }).set(ctx.alice.auth);
    expect(deleted.body).toEqual({ projectId: child.projectId, deleted: true });
    const kept = await ctx.h.http().get('/api/v1/notes').query({ noteId: note.body.note.noteId }).set(ctx.alice.auth);
    expect(kept.body.note.projectId).toBeNull();
    expect((await ctx.h.http().delete('/api/v1/projects').query({ projectId: parent.projectId }).set(ctx.alice.auth)).status).toBe(200);
  });

  test('project rules on bad input', async () => {
    const p = await create(ctx.alice, { name: 'Rules' });
    const bad = [
      { name: '   ' },
      { name: 'x'.repeat(201) },
      { name: 'ok', color: 'blue' },
      { name: 'ok', instructions: 'x'.repeat(20001) },
      { name: 'ok', clientId: '' },
    ];
    for (const body of bad) {
      const res = await ctx.h.http().post('/api/v1/projects').set(ctx.alice.auth).send(body);
      expect(res.status).toBe(400);
    }
    const self = await ctx.h.http().patch('/api/v1/projects').set(ctx.alice.auth).send({ projectId: p.projectId, parentId: p.projectId });
    expect(self.status).toBe(409);
  });
});

describe('projects: the collection contract', () => {
  describeCrudContract(
    {
      path: '/api/v1/projects',
      idField: 'projectId',
      one: 'project',
      many: 'projects',
      create: (n) => ({ name: `Project ${n}` }),
      update: { name: 'Renamed', description: 'new', color: null },
      invalidCreates: [{}, { name: '' }, { name: 7 }, { name: 'ok', parentId: '' }],
      invalidUpdates: [{ name: '' }, { color: '#12' }, { omitId: true }, { description: 'x'.repeat(2001) }],
    },
    () => ctx.h,
  );
});
