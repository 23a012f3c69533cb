import { createHmac, randomBytes } from 'node:crypto';
import type { SealedColumn } from '../../platform/secrets';

const SECRET_PREFIX = 'whsec_';

/** A new signing secret: `whsec_` and the base64 of 32 random bytes (Standard Webhooks). */
export function newSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/**
 * The `webhook-signature` header value for one attempt: `v1,<base64 HMAC-SHA256>` of
 * `{id}.{timestamp}.{body}` per secret, separated by spaces (two during a rotation's grace period).
 */
export function signatureHeader(secrets: readonly string[], id: string, timestampSeconds: number, body: string): string {
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
      return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
    })
    .join(' ');
}

/** What a subscription's signing secrets (current and previous) are sealed for. */
export function signingSecretContext(subscriptionId: string): string {
  return `webhook-signing-secret:${subscriptionId}`;
}

/** The columns holding sealed signing secrets, for key rotation. */
export const sealedColumns: SealedColumn[] = [
  { table: 'webhook_subscriptions', idColumn: 'id', column: 'secret', context: signingSecretContext },
  { table: 'webhook_subscriptions', idColumn: 'id', column: 'previous_secret', context: signingSecretContext },
];
