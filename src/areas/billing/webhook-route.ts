import express, { type Router } from 'express';
import type { StripeEvents } from './stripe';

/** Stripe events are small; anything larger is not one. */
const MAX_EVENT_BYTES = 512 * 1024;

/**
 * `POST /webhooks/stripe`: the payment provider's endpoint, a web-app route outside /api/v1 (not
 * part of the public document). It reads the raw body (the signature covers its exact bytes),
 * answers `400 invalid_signature` for anything that does not verify, `400 invalid_request` for a
 * signed body that is not a well-formed event, and `200 { received }` once the event is stored and
 * applied, or found to be a redelivery (`duplicate: true`).
 */
export function stripeWebhookRouter(events: StripeEvents): Router {
  const router = express.Router();
  router.post('/webhooks/stripe', express.raw({ type: () => true, limit: MAX_EVENT_BYTES }), async (req, res) => {
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const event = events.verify(body, req.get('stripe-signature'));
    const outcome = await events.receive(event);
    res.json({ received: true, duplicate: outcome === 'duplicate', outcome });
  });
  return router;
}
