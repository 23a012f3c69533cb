import supertest from 'supertest';
import { describeCrudContract } from '../helpers/crud-contract';
import { anotherInstance, useHarness } from '../helpers/harness';

const ctx = useHarness('alice');

describe('notes', () => {
  test('defaults, filters by project and pinned state, and moves out of a project', async () => {
    const project = (await ctx.alice.api.POST('/api/v1/projects', { body: { name: 'Notes home' } })).data!.project;
    const plain = (await ctx.alice.api.POST('/api/v1/notes', { body: {} })).data!.note;
    expect(plain).toMatchObject({ title: '', content: '', pinned: false, projectId: null });
    const pinned = (
      await ctx.alice.api.POST('/api/v1/notes', {
        body: { title: 'Pinned', content: '# Heading', pinned: true, projectId: project.projectId },
      })
    ).data!.note;

    const inProject = await ctx.alice.api.GET('/api/v1/notes', { params: { query: { projectId: project.projectId } } });
    expect(inProject.data && 'notes' in inProject.data && inProject.data.notes.map((n) => n.noteId)).toEqual([pinned.noteId]);
    const onlyPinned = await ctx.h.http().get('/api/v1/notes').query({ pinned: 'true' }).set(ctx.alice.auth);
    expect(onlyPinned.body.notes.map((n: { noteId: string }) => n.noteId)).toEqual([pinned.noteId]);
    const unpinned = await ctx.h.http().get('/api/v1/notes').query({ pinned: 'false' }).set(ctx.alice.auth);
    expect(unpinned.body.notes.map((n: { noteId: string }) => n.noteId)).toContain(plain.noteId);

    const moved = await ctx.alice.api.PATCH('/api/v1/notes', { body: { noteId: pinned.noteId, projectId: null } });
    expect(moved.data!.note.projectId).toBeNull();
    expect(moved.data!.note.content).toBe('# Heading');
  });

  test('a page as written from its rows equals each note as presented alone, validated or sent as it is', async () => {
    const project = (await ctx.alice.api.POST('/api/v1/projects', { body: { name: 'Rendered' } })).data!.project;
    await ctx.alice.api.POST('/api/v1/notes', { body: { title: 'No project', content: '</script> \u2028 \t tab' } });
    const everything = await ctx.h.http().get('/api/v1/notes').set(ctx.alice.auth);
    expect(everything.status).toBe(200);
    for (const note of everything.body.notes) {
      const alone = await ctx.h.http().get('/api/v1/notes').query({ noteId: note.noteId }).set(ctx.alice.auth);
      expect(note).toStrictEqual(alone.body.note);
    }
    expect(everything.body.notes.some((note: { projectId: string | null }) => note.projectId === null)).toBe(true);
    await ctx.alice.api.POST('/api/v1/notes', {
      body: { title: 'Quote " and \\ and ünïcode ✓', content: 'line\nbreak', pinned: true, projectId: project.projectId },
    });
    await ctx.alice.api.POST('/api/v1/notes', { body: { title: 'Second', projectId: project.projectId } });
    await ctx.alice.api.POST('/api/v1/notes', { body: { title: 'Third', projectId: project.projectId } });
    const validated = await ctx.h.http().get('/api/v1/notes').query({ projectId: project.projectId, limit: 2 }).set(ctx.alice.auth);
    expect(validated.status).toBe(200);
    expect(validated.body.notes).toHaveLength(2);
    for (const note of validated.body.notes) {
      const alone = await ctx.h.http().get('/api/v1/notes').query({ noteId: note.noteId }).set(ctx.alice.auth);
      expect(note).toStrictEqual(alone.body.note);
    }
    const rest = await ctx.h
      .http()
      .get('/api/v1/notes')
      .query({ projectId: project.projectId, cursor: validated.body.nextCursor })
      .set(ctx.alice.auth);
    expect(rest.body).toMatchObject({ notes: [{ title: 'Quote " and \\ and ünïcode ✓', content: 'line\nbreak' }], nextCursor: null });

    // Outside tests answers are not validated: the page's text is sent as it is.
    const unvalidated = await anotherInstance(ctx.h, { VALIDATE_RESPONSES: 'false' });
    try {
      const raw = await supertest(unvalidated.app)
        .get('/api/v1/notes')
        .query({ projectId: project.projectId, limit: 2 })
        .set(ctx.alice.auth);
      expect(raw.status).toBe(200);
      expect(raw.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(Number(raw.headers['content-length'])).toBe(Buffer.byteLength(raw.text));
      expect(raw.body).toStrictEqual(validated.body);
      const head = await supertest(unvalidated.app).head('/api/v1/notes').set(ctx.alice.auth);
      expect(head.status).toBe(200);
      expect(head.text ?? '').toBe('');
    } finally {
      await unvalidated.close();
    }
  });

  test('every combination of filters and cursor reads what the query builder reads (the page query is compiled once per combination)', async () => {
    const project = (await ctx.alice.api.POST('/api/v1/projects', { body: { name: 'Shapes' } })).data!.project;
    for (let i = 0; i < 6; i += 1) {
      await ctx.alice.api.POST('/api/v1/notes', {
        body: { title: `Shape ${i}`, pinned: i % 2 === 0, ...(i < 4 ? { projectId: project.projectId } : {}) },
      });
    }
    const db = ctx.h.runtime.database.db;
    // What each page should hold, read by a query of its own.
    const expectedPage = (projectId: string | undefined, pinned: boolean | undefined, beforeId: string | null, limit: number) => {
      let query = db.selectFrom('notes').select('id').where('owner_user_id', '=', ctx.alice.userId);
      if (projectId !== undefined) query = query.where('project_id', '=', projectId);
      if (pinned !== undefined) query = query.where('pinned', '=', pinned);
      if (beforeId !== null) query = query.where('id', '<', beforeId);
      return query
        .orderBy('id', 'desc')
        .limit(limit + 1)
        .execute();
    };
    const all = await expectedPage(undefined, undefined, null, 1000);
    const cursorId = all[1]!.id;
    for (const projectId of [undefined, project.projectId]) {
      for (const pinned of [undefined, true, false]) {
        for (const beforeId of [null, cursorId]) {
          // Twice: the first call compiles the combination, the second reuses it with other values.
          for (const limit of [2, 3]) {
            const expected = await expectedPage(projectId, pinned, beforeId, limit);
            const query: Record<string, string> = { limit: String(limit) };
            if (projectId !== undefined) query.projectId = projectId;
            if (pinned !== undefined) query.pinned = String(pinned);
            if (beforeId !== null) query.cursor = Buffer.from(beforeId).toString('base64url');
            const res = await ctx.h.http().get('/api/v1/notes').query(query).set(ctx.alice.auth);
            expect(res.status).toBe(200);
            expect(res.body.notes.map((n: { noteId: string }) => n.noteId)).toEqual(expected.slice(0, limit).map((r) => r.id));
            expect(res.body.nextCursor === null).toBe(expected.length <= limit);
          }
        }
      }
    }
  });

  test('a title over 200 characters is refused', async () => {
    const res = await ctx.h
      .http()
      .post('/api/v1/notes')
      .set(ctx.alice.auth)
      .send({ title: 'x'.repeat(201) });
    expect(res.status).toBe(400);
    expect(res.body.details[0].path).toBe('/body/title');
  });
});

describe('notes: the collection contract', () => {
  describeCrudContract(
    {
      path: '/api/v1/notes',
      idField: 'noteId',
      one: 'note',
      many: 'notes',
      create: (n) => ({ title: `Note ${n}`, content: `Body ${n}` }),
      update: { title: 'Changed', pinned: true },
      invalidCreates: [{ title: 'x'.repeat(201) }, { pinned: 'yes' }, { content: 5 }, { projectId: '' }],
      invalidUpdates: [{ title: 'x'.repeat(201) }, { pinned: 1 }, { omitId: true }, { noteId: '' }],
    },
    () => ctx.h,
  );
});
