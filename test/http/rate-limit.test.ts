import supertest from 'supertest';
import { anotherInstance, useHarnessWith } from '../helpers/harness';

const ctx = useHarnessWith(() => ({ RATE_LIMIT_PER_MINUTE: '5' }), 'alice', 'bob', 'carol');

describe('per-user rate limit', () => {
  test('the request over the limit is 429 rate_limited with Retry-After; other users are not affected', async () => {
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 6; i += 1) {
      last = await ctx.h.http().get('/api/v1/notes').set(ctx.alice.auth);
      statuses.push(last.status);
      if (i === 0) expect(last.headers).toMatchObject({ 'ratelimit-limit': '5', 'ratelimit-remaining': '4' });
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    expect(last!.body).toMatchObject({ code: 'rate_limited', retryAfter: expect.any(Number) });
    const retryAfter = Number(last!.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(last!.headers['ratelimit-remaining']).toBe('0');
    // A refused write changes nothing.
    const create = await ctx.h.http().post('/api/v1/notes').set(ctx.alice.auth).send({ title: 'Over the limit', content: '' });
    expect(create.status).toBe(429);
    expect((await ctx.h.http().get('/api/v1/notes').set(ctx.bob.auth)).status).toBe(200);
    const count = await ctx.h.runtime.database.db.selectFrom('notes').select((eb) => eb.fn.countAll<number>().as('n')).where('owner_user_id', '=', ctx.alice.userId).executeTakeFirst();
    expect(Number(count?.n)).toBe(0);
  });

  // On Postgres; the embedded PGlite is one process's database, and its count is that process's.
  (process.env.TEST_DATABASE_URL ? test : test.skip)('the count is shared by every instance on the database', async () => {
    const other = await anotherInstance(ctx.h, { RATE_LIMIT_PER_MINUTE: '5' });
    try {
      const statuses = [];
      for (let i = 0; i < 3; i += 1) statuses.push((await ctx.h.http().get('/api/v1/projects').set(ctx.carol.auth)).status);
      for (let i = 0; i < 3; i += 1) statuses.push((await supertest(other.app).get('/api/v1/projects').set(ctx.carol.auth)).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    } finally {
      await other.close();
    }
  });

  test('unauthenticated requests are answered 401 before any count', async () => {
    for (let i = 0; i < 7; i += 1) expect((await ctx.h.http().get('/api/v1/notes')).status).toBe(401);
  });
});
