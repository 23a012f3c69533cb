import type pg from 'pg';
import { type RateLimiterAbstract, RateLimiterMemory, RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';

/** The outcome of one request's count: allowed or not, what is left, when the window ends. */
export interface RateDecision {
  allowed: boolean;
  remaining: number;
  /** Milliseconds until the window ends (and the count starts again). */
  resetMs: number;
}

export interface RateLimiter {
  consume(key: string): Promise<RateDecision>;
}

const WINDOW_SECONDS = 60;

/** The table migration 0024 leaves in the shape RateLimiterPostgres reads and writes. */
const TABLE = 'rate_limits';

/** A library limiter's answer (a refusal is its rejection with a RateLimiterRes) as a decision. */
function decisions(limiter: RateLimiterAbstract): RateLimiter {
  return {
    async consume(key) {
      try {
        const state = await limiter.consume(key);
        return { allowed: true, remaining: state.remainingPoints, resetMs: state.msBeforeNext };
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        return { allowed: false, remaining: 0, resetMs: rejection.msBeforeNext };
      }
    },
  };
}

/** A fixed one-minute window counted in this process only (the embedded database's one process). */
export function memoryRateLimiter(perMinute: number): RateLimiter {
  return decisions(new RateLimiterMemory({ points: perMinute, duration: WINDOW_SECONDS, keyPrefix: '' }));
}

/**
 * A fixed one-minute window per key, shared by every instance through the `rate_limits` table
 * (created by our migrations, so the library creates nothing at start). Keys carry their limit's
 * name (`user:…`, `auth-failures:…`), so limits share the table, never a row. A key refused once is
 * refused in memory until its window ends, without a query. While the database cannot answer,
 * the insurance limiter counts in this process rather than refusing or failing every request.
 */
export function postgresRateLimiter(pool: pg.Pool, perMinute: number): RateLimiter {
  return decisions(
    new RateLimiterPostgres({
      storeClient: pool,
      storeType: 'pool',
      tableName: TABLE,
      tableCreated: true,
      keyPrefix: '',
      points: perMinute,
      duration: WINDOW_SECONDS,
      inMemoryBlockOnConsumed: perMinute + 1,
      insuranceLimiter: new RateLimiterMemory({ points: perMinute, duration: WINDOW_SECONDS, keyPrefix: '' }),
    }),
  );
}
