import { createHash, randomBytes } from 'node:crypto';
import type { Database } from '../../platform/db';
import * as repo from './repository';

/** How often a live session's last use is written back (the idle timeout is hours, not seconds). */
const TOUCH_INTERVAL_MS = 60_000;

const hashToken = (token: string) => createHash('sha256').update(token).digest('base64url');

export interface SessionPolicy {
  idleMs: number;
  absoluteMs: number;
}

/**
 * Server-side browser sessions. The cookie carries a random token; only its hash is stored, so a
 * copy of the table cannot be turned into working cookies.
 */
export class SessionService {
  constructor(
    private readonly db: Database,
    private readonly policy: SessionPolicy,
  ) {}

  async create(userId: string): Promise<{ token: string; userId: string; createdAt: Date; expiresAt: Date }> {
    const token = randomBytes(32).toString('base64url');
    const createdAt = new Date();
    const row = await repo.insertSession(this.db, {
      tokenHash: hashToken(token),
      userId,
      createdAt,
      expiresAt: new Date(createdAt.getTime() + this.policy.absoluteMs),
    });
    return { token, userId: row.user_id, createdAt: row.created_at, expiresAt: row.expires_at };
  }

  /** The user id of a live session, or null. Extends the idle timeout. */
  async resolve(token: string): Promise<string | null> {
    const tokenHash = hashToken(token);
    const now = new Date();
    const row = await repo.findLiveSession(this.db, tokenHash, now, new Date(now.getTime() - this.policy.idleMs));
    if (!row) return null;
    if (now.getTime() - row.last_seen_at.getTime() > TOUCH_INTERVAL_MS) await repo.touchSession(this.db, tokenHash, now);
    return row.user_id;
  }

  async end(token: string): Promise<boolean> {
    return repo.endSession(this.db, hashToken(token), new Date());
  }
}
