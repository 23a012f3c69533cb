import pRetry from 'p-retry';
import { isConnectionFailure } from './db';

/** How long a write is tried again while the database cannot be reached. */
export interface ReconnectPolicy {
  /** Tries stop after this long; the last failure is then thrown. */
  forMs: number;
}

/**
 * Runs `write`, and again (p-retry: after 200 ms, doubling up to 2 s) each time it fails because
 * the database cannot be reached (a restart, a failover), for up to `forMs`. Any other error is
 * thrown at once. Only for writes that are safe to repeat: each is guarded by the state it moves
 * the row from, so one that committed just before its connection was lost changes nothing again.
 */
export function whileUnreachable<T>(write: () => Promise<T>, policy: ReconnectPolicy): Promise<T> {
  return pRetry(write, {
    retries: Number.POSITIVE_INFINITY,
    factor: 2,
    minTimeout: 200,
    maxTimeout: 2000,
    randomize: false,
    maxRetryTime: policy.forMs,
    shouldRetry: ({ error }) => isConnectionFailure(error),
  });
}
