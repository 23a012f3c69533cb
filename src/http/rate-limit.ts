import { CompiledQuery } from 'kysely';
import type { RequestHandler } from 'express';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import type { Database } from '../platform/db';
import { errors } from './errors';

const WINDOW_SECONDS = 60;

/**
 * The per-user request limit. On a shared database it is counted there (the `rate_limits` table)
 * so that every instance shares one count: rate-limiter-flexible's Postgres limiter, its queries run
 * through Kysely, with a per-instance in-memory count standing in while the database cannot answer
 * rather than refusing everything. The embedded database belongs to one process, so there the
 * count is kept in memory and costs no query.
 */
export function perUserRateLimit(db: Database, perMinute: number, shared: boolean): RequestHandler {
  const memory = new RateLimiterMemory({ points: perMinute, duration: WINDOW_SECONDS, keyPrefix: 'user' });
  const limiter = !shared ? memory : new RateLimiterPostgres({
    // The store's queries, run through Kysely.
    storeClient: { query: (query: { text: string; values?: unknown[] }) => db.executeQuery(CompiledQuery.raw(query.text, query.values ?? [])) },
    storeType: 'pool',
    tableName: 'rate_limits',
    tableCreated: true, // by the migrations
    clearExpiredByTimeout: true,
    points: perMinute,
    duration: WINDOW_SECONDS,
    keyPrefix: 'user',
    insuranceLimiter: memory,
  });
  return async function perUserRateLimitMiddleware(req, res, next) {
    const userId = req.caller?.userId;
    if (userId === undefined) return next();
    try {
      const used = await limiter.consume(userId);
      setHeaders(res, perMinute, used);
      next();
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) return next(rejection);
      setHeaders(res, perMinute, rejection);
      next(errors.rateLimited(Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)), perMinute));
    }
  };
}

/** The IETF draft's RateLimit-* headers: the limit, what is left, seconds until the window resets. */
function setHeaders(res: Parameters<RequestHandler>[1], limit: number, state: RateLimiterRes): void {
  res.set({
    'RateLimit-Limit': String(limit),
    'RateLimit-Remaining': String(state.remainingPoints),
    'RateLimit-Reset': String(Math.ceil(state.msBeforeNext / 1000)),
  });
}
