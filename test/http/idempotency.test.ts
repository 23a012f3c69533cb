import { randomUUID } from 'node:crypto';
import { type TestUser, useHarness } from '../helpers/harness';

const ctx = useHarness('alice', 'bob');

const creates = [
  { path: '/api/v1/projects', many: 'projects', body: (s: string) => ({ name: `P ${s}`, description: 'd' }), other: { name: 'Other' } },
  { path: '/api/v1/notes', many: 'notes', body: (s: string) => ({ title: `N ${s}`, content: 'c' }), other: { title: 'Other' } },
  {
    path: '/api/v1/memory',
    many: 'memoryItems',
    body: (s: string) => ({ kind: 'fact', content: `M ${s}` }),
    other: { kind: 'fact', content: 'Other' },
  },
  { path: '/api/v1/skills', many: 'skills', body: (s: string) => ({ name: `S ${s}`, description: 'd' }), other: { name: 'Other' } },
];

async function count(user: TestUser, path: string, many: string): Promise<number> {
  return (await ctx.h.http().get(path).query({ limit: 200 }).set(user.auth)).body[many].length;
}

describe.each(creates)('Idempotency-Key on POST $path', ({ path, many, body, other }) => {
  test('a repeated request gets the first response and creates nothing more', async () => {
    const key = randomUUID();
    const unique = randomUUID();
    const before = await count(ctx.alice, path, many);
    const first = await ctx.h.http().post(path).set(ctx.alice.auth).set('Idempotency-Key', key).send(body(unique));
    expect(first.status).toBe(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    // Same body with its keys in another order.
    const reordered = Object.fromEntries(Object.entries(body(unique)).reverse());
    const again = await ctx.h.http().post(path).set(ctx.alice.auth).set('Idempotency-Key', key).send(reordered);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await count(ctx.alice, path, many)).toBe(before + 1);
  });

  test('the same key with another body is a 422 and changes nothing', async () => {
    const key = randomUUID();
    await ctx.h.http().post(path).set(ctx.alice.auth).set('Idempotency-Key', key).send(body(randomUUID())).expect(200);
    const before = await count(ctx.alice, path, many);
    const reused = await ctx.h.http().post(path).set(ctx.alice.auth).set('Idempotency-Key', key).send(other);
    expect(reused.status).toBe(422);
    expect(reused.body.code).toBe('idempotency_key_reused');
    expect(await count(ctx.alice, path, many)).toBe(before);
  });

  test('keys belong to their user', async () => {
    const key = randomUUID();
    const mine = await ctx.h.http().post(path).set(ctx.alice.auth).set('Idempotency-Key', key).send(body(randomUUID()));
    const theirs = await ctx.h.http().post(path).set(ctx.bob.auth).set('Idempotency-Key', key).send(other);
    expect(theirs.status).toBe(200);
    expect(theirs.headers['idempotent-replayed']).toBeUndefined();
    expect(JSON.stringify(theirs.body)).not.toBe(JSON.stringify(mine.body));
  });

  test('a failed request releases its key', async () => {
    const key = randomUUID();
    const unique = randomUUID();
    const failed = await ctx.h
      .http()
      .post(path)
      .set(ctx.alice.auth)
      .set('Idempotency-Key', key)
      .send({ ...body(unique), [path.endsWith('projects') ? 'parentId' : 'projectId']: 'missing-project' });
    expect(failed.status).toBe(404);
    const retried = await ctx.h.http().post(path).set(ctx.alice.auth).set('Idempotency-Key', key).send(body(unique));
    expect(retried.status).toBe(200);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
  });

  test('concurrent requests with one key create one record', async () => {
    const key = randomUUID();
    const unique = randomUUID();
    const before = await count(ctx.alice, path, many);
    const results = await Promise.all(
      Array.from({ length: 5 }, () => ctx.h.http().post(path).set(ctx.alice.auth).set('Idempotency-Key', key).send(body(unique))),
    );
    for (const r of results) expect([200, 409]).toContain(r.status);
    expect(results.some((r) => r.status === 200)).toBe(true);
    expect(await count(ctx.alice, path, many)).toBe(before + 1);
  });

  test('a malformed key is a 400', async () => {
    for (const key of ['x'.repeat(256), 'has space']) {
      const res = await ctx.h.http().post(path).set(ctx.alice.auth).set('Idempotency-Key', key).send(body(randomUUID()));
      expect(res.status).toBe(400);
    }
  });
});

test('a claim left by a crashed instance blocks until its lease ends, then is taken over', async () => {
  const db = ctx.h.runtime.database.db;
  const key = randomUUID();
  await ctx.h.http().post('/api/v1/notes').set(ctx.alice.auth).set('Idempotency-Key', key).send({ title: 'crash' }).expect(200);
  // As if the instance had died after claiming the key and before recording the response.
  const pending = () =>
    db.updateTable('idempotency_keys').set({ response_body: null }).where('user_id', '=', ctx.alice.userId).where('key', '=', key);
  await pending()
    .set({ locked_until: new Date(Date.now() + 60_000) })
    .execute();
  const blocked = await ctx.h.http().post('/api/v1/notes').set(ctx.alice.auth).set('Idempotency-Key', key).send({ title: 'crash' });
  expect(blocked.status).toBe(409);
  await pending()
    .set({ locked_until: new Date(Date.now() - 1) })
    .execute();
  const takenOver = await ctx.h.http().post('/api/v1/notes').set(ctx.alice.auth).set('Idempotency-Key', key).send({ title: 'crash' });
  expect(takenOver.status).toBe(200);
  expect(takenOver.headers['idempotent-replayed']).toBeUndefined();
  const replay = await ctx.h.http().post('/api/v1/notes').set(ctx.alice.auth).set('Idempotency-Key', key).send({ title: 'crash' });
  expect(replay.body).toEqual(takenOver.body);
});
