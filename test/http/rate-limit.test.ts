import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import supertest from 'supertest';
import { SharedRateLimiter } from '../../src/platform/rate-limiter';
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

  describe('the shared count (Postgres)', () => {
    const onPostgres = process.env.TEST_DATABASE_URL ? test : test.skip;
    const row = async (key: string) =>
      (await sql<{ points: number }>`select points from rate_limits where key = ${key}`.execute(ctx.h.runtime.database.db)).rows[0]?.points;

    onPostgres('an instance reserves 1% of the limit at a time and spends it without a query', async () => {
      const key = `limiter-${randomUUID()}`;
      const a = new SharedRateLimiter(ctx.h.runtime.database.db, 1000);
      const b = new SharedRateLimiter(ctx.h.runtime.database.db, 1000);
      for (let i = 0; i < 15; i += 1) expect((await a.consume(key)).allowed).toBe(true);
      expect(await row(key)).toBe(20); // two batches of 10
      const fromB = await b.consume(key);
      expect(await row(key)).toBe(30);
      // What B knows: 30 taken from the shared count, 9 of them still its own.
      expect(fromB).toMatchObject({ allowed: true, remaining: 979 });
      expect(fromB.resetMs).toBeGreaterThan(55_000);
    });

    onPostgres('all instances together never pass the limit, and lose at most one batch each', async () => {
      const key = `limiter-${randomUUID()}`;
      const instances = [0, 1, 2].map(() => new SharedRateLimiter(ctx.h.runtime.database.db, 300));
      let allowed = 0;
      const decisions = await Promise.all(
        Array.from({ length: 400 }, (_, i) => instances[i % 3]!.consume(key)),
      );
      for (const decision of decisions) if (decision.allowed) allowed += 1;
      expect(allowed).toBeLessThanOrEqual(300);
      expect(allowed).toBeGreaterThanOrEqual(300 - 3 * 3);
      expect(await row(key)).toBeLessThanOrEqual(300);
      const refused = decisions.find((decision) => !decision.allowed);
      expect(refused).toMatchObject({ remaining: 0 });
    });

    onPostgres('a new window starts the count again', async () => {
      const key = `limiter-${randomUUID()}`;
      let now = Date.now();
      const limiter = new SharedRateLimiter(ctx.h.runtime.database.db, 2, () => now);
      expect((await limiter.consume(key)).allowed).toBe(true);
      expect((await limiter.consume(key)).allowed).toBe(true);
      expect(await limiter.consume(key)).toMatchObject({ allowed: false, remaining: 0 });
      now += 60_001;
      expect(await limiter.consume(key)).toMatchObject({ allowed: true, remaining: 1 });
      expect(await row(key)).toBe(1);
    });
  });
});
