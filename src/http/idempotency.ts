import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { IdempotencyStore } from '../platform/idempotency';
import { errors } from '../platform/errors';

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
export async function runIdempotent<T>(request: IdempotentRequest, execute: () => Promise<T>): Promise<{ body: T; replayed: boolean }> {
  const { store, userId, key, operationId } = request;
  // RFC 8785 canonical JSON: equal bodies hash equally whatever their key order.
  const hash = createHash('sha256')
    .update(canonicalize(request.body ?? null) ?? 'null')
    .digest('base64url');
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
