import { CompiledQuery } from 'kysely';
import type { RequestHandler } from 'express';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import type { Database } from '../platform/db';
import { errors } from './errors';

const WINDOW_SECONDS = 60;

/**
 * The per-user request limit, counted in the database (the `rate_limits` table) so that every
 * instance shares one count. The store is rate-limiter-flexible's Postgres limiter, its queries run
 * through Kysely (so on Postgres and on the embedded PGlite alike); while the database cannot answer,
 * a per-instance in-memory count stands in rather than refusing everything.
 */
export function perUserRateLimit(db: Database, perMinute: number): RequestHandler {
  const store = {
    query: async (query: { text: string; values?: unknown[] }) => db.executeQuery(CompiledQuery.raw(query.text, query.values ?? [])),
  };
  const limiter = new RateLimiterPostgres({
    storeClient: store,
    storeType: 'pool',
    tableName: 'rate_limits',
    tableCreated: true, // by the migrations
    clearExpiredByTimeout: true,
    points: perMinute,
    duration: WINDOW_SECONDS,
    keyPrefix: 'user',
    insuranceLimiter: new RateLimiterMemory({ points: perMinute, duration: WINDOW_SECONDS, keyPrefix: 'user' }),
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
