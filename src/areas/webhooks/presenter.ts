import type { components } from '../../../generated/api';
import { millis, millisOrNull } from '../../platform/db/timestamps';
import type { AttemptRow, DeliveryView, SubscriptionView } from './repository';

type Schemas = components['schemas'];

/** A subscription as clients see it: never its secrets. */
export function presentSubscription(row: SubscriptionView): Schemas['WebhookSubscription'] {
  const previousSecretExpiry = millisOrNull(row.previous_secret_expires_at);
  return {
    subscriptionId: row.id,
    url: row.url,
    description: row.description,
    events: row.events as Schemas['WebhookEventType'][],
    enabled: row.enabled,
    status: !row.enabled ? 'disabled' : row.failing_since ? 'failing' : 'active',
    disabledReason: row.enabled ? null : ((row.disabled_reason ?? 'user') as Schemas['WebhookSubscription']['disabledReason']),
    disabledAt: row.enabled ? null : millisOrNull(row.disabled_at),
    failingSince: millisOrNull(row.failing_since),
    previousSecretExpiresAt: previousSecretExpiry !== null && previousSecretExpiry > Date.now() ? previousSecretExpiry : null,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}

function presentAttempt(row: AttemptRow): Schemas['WebhookAttempt'] {
  return {
    attempt: row.attempt,
    attemptedAt: row.attempted_at.getTime(),
    outcome: row.outcome as Schemas['WebhookAttempt']['outcome'],
    responseStatus: row.response_status,
    responseBody: row.response_body,
    latencyMs: row.latency_ms,
    error: row.error,
  };
}

/** A delivery as read alone (its times Dates) or listed (epoch milliseconds), with its attempts. */
export function presentDelivery({ delivery, attempts }: { delivery: DeliveryView; attempts: AttemptRow[] }): Schemas['WebhookDelivery'] {
  const pending = delivery.status === 'pending';
  return {
    deliveryId: delivery.id,
    subscriptionId: delivery.subscription_id,
    eventId: delivery.event_id,
    eventType: delivery.event_type,
    status: delivery.status as Schemas['WebhookDelivery']['status'],
    attemptCount: attempts.length,
    nextAttemptAt: pending ? millis(delivery.next_attempt_at) : null,
    createdAt: millis(delivery.created_at),
    updatedAt: millis(delivery.updated_at),
    completedAt: millisOrNull(delivery.completed_at),
    event: JSON.parse(delivery.event_body) as Schemas['WebhookEvent'],
    attempts: attempts.map(presentAttempt),
  };
}
