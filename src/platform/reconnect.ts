import { isConnectionFailure } from './db';

/** How long a write is tried again while the database cannot be reached, and the pauses between tries. */
export interface ReconnectPolicy {
  /** Tries stop after this long; the last failure is then thrown. */
  forMs: number;
  firstPauseMs?: number;
  maxPauseMs?: number;
}

const FIRST_PAUSE_MS = 200;
const MAX_PAUSE_MS = 2000;

/**
 * Runs `write`, and again after a pause (doubling up to `maxPauseMs`) each time it fails because
 * the database cannot be reached (a restart, a failover), for up to `forMs`. Any other error is
 * thrown at once. Only for writes that are safe to repeat: each is guarded by the state it moves
 * the row from, so one that committed just before its connection was lost changes nothing again.
 */
export async function whileUnreachable<T>(write: () => Promise<T>, policy: ReconnectPolicy): Promise<T> {
  const deadline = Date.now() + policy.forMs;
  let pause = policy.firstPauseMs ?? FIRST_PAUSE_MS;
  for (;;) {
    try {
      return await write();
    } catch (error) {
      if (!isConnectionFailure(error) || Date.now() + pause > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, policy.maxPauseMs ?? MAX_PAUSE_MS);
    }
  }
}
