import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import type { Harness } from './harness';

export const STRIPE_SECRET = 'whsec_test_billing_endpoint_secret_0123456789';

/** A Stripe event envelope around `object`, as the provider sends it (`previous`: an update's `previous_attributes`). */
export function stripeEvent(
  type: string,
  object: Record<string, unknown>,
  options: { id?: string; created?: number; previous?: Record<string, unknown> } = {},
) {
  return {
    id: options.id ?? `evt_${randomUUID().replace(/-/g, '')}`,
    object: 'event',
    api_version: '2025-10-29.clover',
    created: options.created ?? Math.floor(Date.now() / 1000),
    type,
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    data: options.previous ? { object, previous_attributes: options.previous } : { object },
  };
}

/** A subscription object (period on its item, as current API versions send it). */
export function subscriptionObject(fields: {
  id: string;
  customer: string;
  status?: string;
  priceId?: string;
  userId?: string;
  start?: number;
  end?: number;
  cancelAtPeriodEnd?: boolean;
}) {
  const start = fields.start ?? Math.floor(Date.UTC(2026, 10, 1) / 1000);
  const end = fields.end ?? Math.floor(Date.UTC(2026, 11, 1) / 1000);
  return {
    id: fields.id,
    object: 'subscription',
    customer: fields.customer,
    status: fields.status ?? 'active',
    cancel_at_period_end: fields.cancelAtPeriodEnd ?? false,
    metadata: fields.userId ? { userId: fields.userId } : {},
    items: {
      object: 'list',
      data: [
        {
          id: `si_${fields.id}`,
          price: { id: fields.priceId ?? 'price_pro_monthly' },
          current_period_start: start,
          current_period_end: end,
        },
      ],
    },
  };
}

/** POSTs `payload` to the provider route, signed with `secret` at `timestamp` (seconds). */
export function deliver(h: Harness, payload: string, options: { secret?: string; timestamp?: number; header?: string } = {}) {
  const header =
    options.header ??
    Stripe.webhooks.generateTestHeaderString({ payload, secret: options.secret ?? STRIPE_SECRET, timestamp: options.timestamp });
  return h.http().post('/webhooks/stripe').set('Content-Type', 'application/json').set('Stripe-Signature', header).send(payload);
}
