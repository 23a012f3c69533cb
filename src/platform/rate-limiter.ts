import { sql } from 'kysely';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { Database } from './db';

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

const WINDOW_MS = 60_000;
/** How often an instance deletes the shared rows of ended windows. */
const SWEEP_EVERY_MS = 5 * 60_000;

/** A fixed one-minute window counted in this process only (the embedded database's one process). */
export function memoryRateLimiter(perMinute: number): RateLimiter {
  const memory = new RateLimiterMemory({ points: perMinute, duration: WINDOW_MS / 1000 });
  return {
    async consume(key) {
      try {
        const state = await memory.consume(key);
        return { allowed: true, remaining: state.remainingPoints, resetMs: state.msBeforeNext };
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        return { allowed: false, remaining: 0, resetMs: rejection.msBeforeNext };
      }
    },
  };
}

/** What this instance holds of a key's current window. */
interface Window {
  /** Points reserved from the shared count and not used yet. */
  left: number;
  /** The shared count after this instance's last reservation. */
  shared: number;
  endsAt: number;
}

/**
 * A fixed one-minute window per key, shared by every instance through the `rate_limits` table.
 * An instance does not write the count on every request: it reserves points in batches of 1% of
 * the limit (at least one) with one atomic upsert and spends them locally, so a busy user costs a
 * query per batch instead of per request. The shared count is exact up to the points instances
 * hold unused (at most one batch each), which can end a window's allowance that much early,
 * never late. A window found exhausted is refused locally until it ends (the shared count only
 * grows within a window). While the database cannot answer, a per-instance in-memory count
 * stands in rather than refusing everything.
 */
export class SharedRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, Window>();
  private readonly reserving = new Map<string, Promise<void>>();
  private readonly batch: number;
  private readonly fallback: RateLimiter;
  private lastSweep: number;

  constructor(
    private readonly db: Database,
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    this.batch = Math.max(1, Math.floor(perMinute / 100));
    this.fallback = memoryRateLimiter(perMinute);
    this.lastSweep = now();
  }

  async consume(key: string): Promise<RateDecision> {
    for (;;) {
      const now = this.now();
      const window = this.windows.get(key);
      if (window && window.endsAt > now) {
        if (window.left > 0) {
          window.left -= 1;
          return { allowed: true, remaining: Math.max(0, this.perMinute - window.shared + window.left), resetMs: window.endsAt - now };
        }
        if (window.shared >= this.perMinute) return { allowed: false, remaining: 0, resetMs: window.endsAt - now };
      }
      let reservation = this.reserving.get(key);
      if (!reservation) {
        reservation = this.reserve(key, now).finally(() => this.reserving.delete(key));
        this.reserving.set(key, reservation);
      }
      try {
        await reservation;
      } catch {
        return this.fallback.consume(key);
      }
    }
  }

  /** Takes up to one batch of the key's shared count for this instance (none when it is spent). */
  private async reserve(key: string, now: number): Promise<void> {
    const { rows } = await sql<{ points: number; granted: number; expire: string }>`
      insert into rate_limits as r (key, points, granted, expire)
      values (${key}, ${this.batch}, ${this.batch}, ${now + WINDOW_MS})
      on conflict (key) do update set
        points = case when r.expire <= ${now} then excluded.points else r.points + least(${this.batch}, greatest(${this.perMinute} - r.points, 0)) end,
        granted = case when r.expire <= ${now} then excluded.granted else least(${this.batch}, greatest(${this.perMinute} - r.points, 0)) end,
        expire = case when r.expire <= ${now} then excluded.expire else r.expire end
      returning points, granted, expire`.execute(this.db);
    const row = rows[0] as { points: number; granted: number; expire: string };
    this.windows.set(key, { left: row.granted, shared: row.points, endsAt: Number(row.expire) });
    if (now - this.lastSweep >= SWEEP_EVERY_MS) this.sweep(now);
  }

  /** Forgets ended windows, here and (best effort, in the background) in the table. */
  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [key, window] of this.windows) if (window.endsAt <= now) this.windows.delete(key);
    sql`delete from rate_limits where expire <= ${now}`.execute(this.db).catch(() => undefined);
  }
}
