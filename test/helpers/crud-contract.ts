import type { Harness, TestUser } from './harness';

type Body = Record<string, unknown>;
type RecordJson = Record<string, unknown>;

export interface CrudArea {
  path: string;
  /** The id field (`noteId`) and the envelope names (`note`, `notes`). */
  idField: string;
  one: string;
  many: string;
  /** A valid create body; `n` makes it unique. */
  create: (n: number) => Body;
  update: Body;
  invalidCreates: Body[];
  invalidUpdates: Body[];
  /** Whether records may name a project (`projectId`); true unless set to false. */
  projectScoped?: boolean;
}

/**
 * The behaviour every collection area shares, run against the real service: the happy path, another
 * user's record (404 and unchanged), bad input (400 and unchanged) and no credentials (401), for
 * each of its four operations, plus paging.
 */
export function describeCrudContract(area: CrudArea, harness: () => Harness): void {
  let h: Harness;
  let owner: TestUser;
  let other: TestUser;
  let n = 0;

  const create = async (user: TestUser, extra: Body = {}) => {
    const res = await h
      .http()
      .post(area.path)
      .set(user.auth)
      .send({ ...area.create((n += 1)), ...extra });
    expect(res.status).toBe(200);
    return res.body[area.one] as RecordJson;
  };
  const idOf = (record: RecordJson) => record[area.idField] as string;
  const read = (user: TestUser, id: string) =>
    h
      .http()
      .get(area.path)
      .query({ [area.idField]: id })
      .set(user.auth);
  const all = async (user: TestUser) => {
    const res = await h.http().get(area.path).query({ limit: 200 }).set(user.auth);
    expect(res.status).toBe(200);
    return res.body[area.many] as RecordJson[];
  };

  beforeAll(async () => {
    h = harness();
    owner = await h.newUser('owner');
    other = await h.newUser('other');
  });

  describe(`GET ${area.path}`, () => {
    test('lists the caller’s records newest first, in pages', async () => {
      const created = [await create(owner), await create(owner), await create(owner)];
      const first = await h.http().get(area.path).query({ limit: 2 }).set(owner.auth);
      expect(first.status).toBe(200);
      expect(first.body[area.many].map(idOf)).toEqual([idOf(created[2]!), idOf(created[1]!)]);
      expect(typeof first.body.nextCursor).toBe('string');
      const second = await h.http().get(area.path).query({ limit: 2, cursor: first.body.nextCursor }).set(owner.auth);
      expect(second.body[area.many].map(idOf)).toEqual([idOf(created[0]!)]);
      expect(second.body.nextCursor).toBeNull();
    });

    test('reads one record by id', async () => {
      const record = await create(owner);
      const res = await read(owner, idOf(record));
      expect(res.status).toBe(200);
      expect(res.body[area.one]).toEqual(record);
    });

    test('another user’s record is not found and not listed', async () => {
      const record = await create(owner);
      const res = await read(other, idOf(record));
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ code: 'not_found', error: expect.any(String) });
      expect((await all(other)).map(idOf)).not.toContain(idOf(record));
    });

    test('bad paging input is a 400', async () => {
      for (const query of [{ limit: 201 }, { limit: 0 }, { limit: 'ten' }, { cursor: '!!' }, { cursor: 'bm90LWFuLWlk' }, { unknown: 1 }]) {
        const res = await h.http().get(area.path).query(query).set(owner.auth);
        expect(res.status).toBe(400);
        expect(res.body.code).toBe('invalid_request');
      }
    });

    test('no credentials is a 401', async () => {
      const res = await h.http().get(area.path);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('unauthenticated');
    });
  });

  describe(`POST ${area.path}`, () => {
    test('bad input is a 400 with details and creates nothing', async () => {
      const before = await all(owner);
      for (const invalid of [...area.invalidCreates, { ...area.create(0), unexpected: true }]) {
        const res = await h.http().post(area.path).set(owner.auth).send(invalid);
        expect(res.status).toBe(400);
        expect(res.body.code).toBe('invalid_request');
        expect(res.body.details.length).toBeGreaterThan(0);
      }
      const malformed = await h.http().post(area.path).set(owner.auth).set('content-type', 'application/json').send('{"oops"');
      expect(malformed.status).toBe(400);
      expect(await all(owner)).toEqual(before);
    });

    test('a userId of another user is a 403; accessToken is accepted and ignored', async () => {
      const before = await all(owner);
      const refused = await h
        .http()
        .post(area.path)
        .set(owner.auth)
        .send({ ...area.create(0), userId: other.userId });
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe('forbidden');
      expect(await all(owner)).toEqual(before);
      const res = await h
        .http()
        .post(area.path)
        .set(owner.auth)
        .send({ ...area.create((n += 1)), userId: owner.userId, accessToken: 'an-ignored-access-token' });
      expect(res.status).toBe(200);
      expect(JSON.stringify(res.body)).not.toContain('an-ignored-access-token');
    });

    if (area.projectScoped !== false) {
      test('a projectId of another user is a 404', async () => {
        const project = await h.http().post('/api/v1/projects').set(other.auth).send({ name: 'Not yours' });
        const body =
          area.idField === 'projectId' ? { parentId: project.body.project.projectId } : { projectId: project.body.project.projectId };
        const res = await h
          .http()
          .post(area.path)
          .set(owner.auth)
          .send({ ...area.create((n += 1)), ...body });
        expect(res.status).toBe(404);
      });
    }

    test('no credentials is a 401 and creates nothing', async () => {
      const before = await all(owner);
      expect(
        (
          await h
            .http()
            .post(area.path)
            .send(area.create((n += 1)))
        ).status,
      ).toBe(401);
      expect(await all(owner)).toEqual(before);
    });
  });

  describe(`PATCH ${area.path}`, () => {
    test('changes only the fields given', async () => {
      const record = await create(owner);
      const res = await h
        .http()
        .patch(area.path)
        .set(owner.auth)
        .send({ [area.idField]: idOf(record), ...area.update });
      expect(res.status).toBe(200);
      expect(res.body[area.one]).toMatchObject({ ...record, ...area.update, updatedAt: expect.any(Number) });
      expect(res.body[area.one].createdAt).toBe(record.createdAt);
    });

    test('another user’s record is not found and unchanged', async () => {
      const record = await create(owner);
      const res = await h
        .http()
        .patch(area.path)
        .set(other.auth)
        .send({ [area.idField]: idOf(record), ...area.update });
      expect(res.status).toBe(404);
      expect((await read(owner, idOf(record))).body[area.one]).toEqual(record);
    });

    test('bad input is a 400 and changes nothing', async () => {
      const record = await create(owner);
      for (const invalid of area.invalidUpdates) {
        const body = 'omitId' in invalid ? { ...area.update } : { [area.idField]: idOf(record), ...invalid };
        const res = await h.http().patch(area.path).set(owner.auth).send(body);
        expect(res.status).toBe(400);
      }
      expect((await read(owner, idOf(record))).body[area.one]).toEqual(record);
    });

    test('no credentials is a 401', async () => {
      const record = await create(owner);
      expect(
        (
          await h
            .http()
            .patch(area.path)
            .send({ [area.idField]: idOf(record), ...area.update })
        ).status,
      ).toBe(401);
      expect((await read(owner, idOf(record))).body[area.one]).toEqual(record);
    });
  });

  describe(`DELETE ${area.path}`, () => {
    test('deletes by query or by body, once', async () => {
      const a = await create(owner);
      const b = await create(owner);
      const byQuery = await h
        .http()
        .delete(area.path)
        .query({ [area.idField]: idOf(a) })
        .set(owner.auth);
      expect(byQuery.status).toBe(200);
      expect(byQuery.body).toEqual({ [area.idField]: idOf(a), deleted: true });
      const byBody = await h
        .http()
        .delete(area.path)
        .send({ [area.idField]: idOf(b) })
        .set(owner.auth);
      expect(byBody.status).toBe(200);
      expect((await read(owner, idOf(a))).status).toBe(404);
      expect(
        (
          await h
            .http()
            .delete(area.path)
            .query({ [area.idField]: idOf(a) })
            .set(owner.auth)
        ).status,
      ).toBe(404);
    });

    test('another user’s record is not found and not deleted', async () => {
      const record = await create(owner);
      const res = await h
        .http()
        .delete(area.path)
        .query({ [area.idField]: idOf(record) })
        .set(other.auth);
      expect(res.status).toBe(404);
      expect((await read(owner, idOf(record))).status).toBe(200);
    });

    test('a missing or ambiguous id is a 400', async () => {
      const record = await create(owner);
      expect((await h.http().delete(area.path).set(owner.auth)).status).toBe(400);
      const mismatch = await h
        .http()
        .delete(area.path)
        .query({ [area.idField]: idOf(record) })
        .send({ [area.idField]: 'other' })
        .set(owner.auth);
      expect(mismatch.status).toBe(400);
      expect((await read(owner, idOf(record))).status).toBe(200);
    });

    test('no credentials is a 401', async () => {
      const record = await create(owner);
      expect(
        (
          await h
            .http()
            .delete(area.path)
            .query({ [area.idField]: idOf(record) })
        ).status,
      ).toBe(401);
      expect((await read(owner, idOf(record))).status).toBe(200);
    });
  });
}
