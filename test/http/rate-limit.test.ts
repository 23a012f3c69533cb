import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { sql } from 'kysely';
import pg from 'pg';
import supertest from 'supertest';
import { postgresRateLimiter } from '../../src/platform/rate-limiter';
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
    const count = await ctx.h.runtime.database.db
      .selectFrom('notes')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('owner_user_id', '=', ctx.alice.userId)
      .executeTakeFirst();
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
    const pool = () => ctx.h.runtime.database.pool as pg.Pool;

    onPostgres('instances counting one key at once never pass the limit together, and refuse the rest', async () => {
      const key = `user:limiter-${randomUUID()}`;
      const instances = [0, 1, 2].map(() => postgresRateLimiter(pool(), 300));
      const decisions = await Promise.all(Array.from({ length: 400 }, (_, i) => instances[i % 3]!.consume(key)));
      expect(decisions.filter((decision) => decision.allowed)).toHaveLength(300);
      const refused = decisions.find((decision) => !decision.allowed);
      expect(refused).toMatchObject({ remaining: 0 });
      expect(refused!.resetMs).toBeGreaterThan(0);
      expect(refused!.resetMs).toBeLessThanOrEqual(60_000);
      const { rows } = await sql<{ points: number }>`select points from rate_limits where key = ${key}`.execute(ctx.h.runtime.database.db);
      expect(rows[0]!.points).toBeGreaterThanOrEqual(301);
    });
  });

  test('while the database cannot answer, each instance counts in memory instead of refusing everyone', async () => {
    // A port nothing listens on: every query fails at once.
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as net.AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const down = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`, connectionTimeoutMillis: 2000 });
    down.on('error', () => undefined);
    try {
      const limiter = postgresRateLimiter(down, 2);
      await expect(down.query('select 1')).rejects.toThrow();
      expect(await limiter.consume('user:someone')).toMatchObject({ allowed: true, remaining: 1 });
      expect(await limiter.consume('user:someone')).toMatchObject({ allowed: true, remaining: 0 });
      expect(await limiter.consume('user:someone')).toMatchObject({ allowed: false, remaining: 0 });
      expect(await limiter.consume('user:someone-else')).toMatchObject({ allowed: true });
    } finally {
      await down.end();
    }
  });
});
