import type { components } from '../../../generated/api';
import type { AttemptRow, SubscriptionView } from './repository';
import type { DeliveryWithAttempts } from './service';

type Schemas = components['schemas'];

const millis = (value: Date | null) => (value ? value.getTime() : null);

/** A subscription as clients see it: never its secrets. */
export function presentSubscription(row: SubscriptionView): Schemas['WebhookSubscription'] {
  return {
    subscriptionId: row.id,
    url: row.url,
    description: row.description,
    events: row.events as Schemas['WebhookEventType'][],
    enabled: row.enabled,
    status: !row.enabled ? 'disabled' : row.failing_since ? 'failing' : 'active',
    disabledReason: row.enabled ? null : ((row.disabled_reason ?? 'user') as Schemas['WebhookSubscription']['disabledReason']),
    disabledAt: row.enabled ? null : millis(row.disabled_at),
    failingSince: millis(row.failing_since),
    previousSecretExpiresAt:
      row.previous_secret_expires_at && row.previous_secret_expires_at.getTime() > Date.now() ? row.previous_secret_expires_at.getTime() : null,
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
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

export function presentDelivery({ delivery, attempts }: DeliveryWithAttempts): Schemas['WebhookDelivery'] {
  const pending = delivery.status === 'pending';
  return {
    deliveryId: delivery.id,
    subscriptionId: delivery.subscription_id,
    eventId: delivery.event_id,
    eventType: delivery.event_type,
    status: delivery.status as Schemas['WebhookDelivery']['status'],
    attemptCount: attempts.length,
    nextAttemptAt: pending ? delivery.next_attempt_at.getTime() : null,
    createdAt: delivery.created_at.getTime(),
    updatedAt: delivery.updated_at.getTime(),
    completedAt: millis(delivery.completed_at),
    event: JSON.parse(delivery.event_body) as Schemas['WebhookEvent'],
    attempts: attempts.map(presentAttempt),
  };
}
