import type { Database } from './db';

export type Claim = { kind: 'claimed' } | { kind: 'replay'; body: unknown } | { kind: 'mismatch' } | { kind: 'in_progress' };

export interface IdempotencyPolicy {
  /** How long a completed response is remembered. */
  retentionMs: number;
  /** How long a claim holds before another request may take it over (a crashed instance's claim). */
  leaseMs: number;
}

export const DEFAULT_IDEMPOTENCY_POLICY: IdempotencyPolicy = { retentionMs: 24 * 3600_000, leaseMs: 60_000 };

/**
 * Remembers, per user and Idempotency-Key, which request claimed the key and its successful
 * response. A key is claimed by inserting its row, so concurrent requests with one key cannot both
 * run, on one instance or many.
 */
export class IdempotencyStore {
  constructor(
    private readonly db: Database,
    private readonly policy: IdempotencyPolicy = DEFAULT_IDEMPOTENCY_POLICY,
  ) {}

  async claim(userId: string, key: string, operationId: string, requestHash: string): Promise<Claim> {
    const now = Date.now();
    await this.db
      .deleteFrom('idempotency_keys')
      .where('user_id', '=', userId)
      .where('created_at', '<', new Date(now - this.policy.retentionMs))
      .execute();
    const inserted = await this.db
      .insertInto('idempotency_keys')
      .values({
        user_id: userId,
        key,
        operation_id: operationId,
        request_hash: requestHash,
        locked_until: new Date(now + this.policy.leaseMs),
        created_at: new Date(now),
      })
      .onConflict((oc) => oc.columns(['user_id', 'key']).doNothing())
      .returning('key')
      .executeTakeFirst();
    if (inserted) return { kind: 'claimed' };

    const row = await this.db
      .selectFrom('idempotency_keys')
      .select(['operation_id', 'request_hash', 'response_body'])
      .where('user_id', '=', userId)
      .where('key', '=', key)
      .executeTakeFirst();
    if (!row) return { kind: 'in_progress' }; // released a moment ago: the client may retry
    if (row.operation_id !== operationId || row.request_hash !== requestHash) return { kind: 'mismatch' };
    if (row.response_body !== null) return { kind: 'replay', body: row.response_body };
    const takenOver = await this.db
      .updateTable('idempotency_keys')
      .set({ locked_until: new Date(now + this.policy.leaseMs) })
      .where('user_id', '=', userId)
      .where('key', '=', key)
      .where('response_body', 'is', null)
      .where('locked_until', '<', new Date(now))
      .returning('key')
      .executeTakeFirst();
    return takenOver ? { kind: 'claimed' } : { kind: 'in_progress' };
  }

  async complete(userId: string, key: string, body: unknown): Promise<void> {
    await this.db
      .updateTable('idempotency_keys')
      .set({ response_body: JSON.stringify(body) })
      .where('user_id', '=', userId)
      .where('key', '=', key)
      .execute();
  }

  /** Forgets a claim whose request failed, so that it can be retried with the same key. */
  async release(userId: string, key: string): Promise<void> {
    await this.db
      .deleteFrom('idempotency_keys')
      .where('user_id', '=', userId)
      .where('key', '=', key)
      .where('response_body', 'is', null)
      .execute();
  }
}
