import { createHash } from 'node:crypto';
import type { IdempotencyStore } from '../platform/idempotency';
import { errors } from '../platform/errors';

/** JSON with object keys sorted, so that equal bodies hash equally whatever their key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export interface IdempotentRequest {
  store: IdempotencyStore;
  userId: string;
  key: string;
  operationId: string;
  body: unknown;
}

/**
 * Runs `execute` at most once per (user, Idempotency-Key): a repeat of a completed request gets the
 * remembered body (`replayed`), a different request under the same key is a 422, a repeat while the
 * first still runs is a 409. A failed request releases its key.
 */
export async function runIdempotent<T>(
  request: IdempotentRequest,
  execute: () => Promise<T>,
): Promise<{ body: T; replayed: boolean }> {
  const { store, userId, key, operationId } = request;
  const hash = createHash('sha256').update(canonicalJson(request.body ?? null)).digest('base64url');
  const claim = await store.claim(userId, key, operationId, hash);
  switch (claim.kind) {
    case 'mismatch':
      throw errors.idempotencyKeyReused();
    case 'in_progress':
      throw errors.conflict('A request with this Idempotency-Key is still in progress; retry later.');
    case 'replay':
      return { body: claim.body as T, replayed: true };
    case 'claimed':
      break;
  }
  let body: T;
  try {
    body = await execute();
  } catch (error) {
    await store.release(userId, key);
    throw error;
  }
  await store.complete(userId, key, body);
  return { body, replayed: false };
}
