import Stripe from 'stripe';
import type { Plan } from '../../config';
import { errors } from '../../http/errors';
import type { Database } from '../../platform/db';
import * as budgets from '../budgets/repository';
import * as repo from './repository';

/** What became of an event: applied, recognised but changing nothing, or a redelivery. */
export type EventOutcome = 'applied' | 'ignored' | 'stale' | 'unmatched' | 'duplicate';

export interface StripeSettings {
  webhookSecret: string;
  toleranceSeconds: number;
  currency: string;
  plans: Plan[];
}

type Log = (level: 'info' | 'warn', message: string, meta: Record<string, unknown>) => void;

/** A field of a provider object, read without trusting its shape (API versions move fields). */
type Loose = Record<string, unknown>;
const str = (value: unknown): string | null => (typeof value === 'string' && value.length > 0 ? value : null);
const num = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);
const obj = (value: unknown): Loose => (typeof value === 'object' && value !== null ? (value as Loose) : {});
/** An id field that may be expanded into its object. */
const idOf = (value: unknown): string | null => str(value) ?? str(obj(value).id);
const seconds = (value: unknown): Date | null => {
  const n = num(value);
  return n === null ? null : new Date(n * 1000);
};

/**
 * Inbound Stripe events: the signature is checked on the raw body with the official library
 * (within the tolerance window), each event id is stored once in the transaction that applies it
 * (a redelivery, even a concurrent one, changes nothing), and subscription and invoice state only
 * moves forward by the provider's event time; a canceled subscription stays canceled.
 */
export class StripeEvents {
  constructor(
    private readonly db: Database,
    private readonly settings: StripeSettings,
    private readonly log: Log,
  ) {}

  /** The verified event; `400 invalid_signature` for a missing, wrong or stale signature. */
  verify(rawBody: Buffer, signature: string | undefined, now = Date.now()): Stripe.Event {
    let event: Stripe.Event;
    try {
      event = Stripe.webhooks.constructEvent(rawBody, signature ?? '', this.settings.webhookSecret, this.settings.toleranceSeconds);
    } catch (error) {
      const reason = error instanceof Stripe.errors.StripeSignatureVerificationError ? error.message : 'The body is not a signed event.';
      throw errors.invalidSignature(`The Stripe-Signature header does not verify: ${reason}`);
    }
    // The library bounds only the age; a signature dated ahead of the window is refused as well.
    const signedAt = Number(/(?:^|,)t=(\d+)/.exec(signature ?? '')?.[1]);
    if (signedAt * 1000 > now + this.settings.toleranceSeconds * 1000) {
      throw errors.invalidSignature('The Stripe-Signature header does not verify: Timestamp outside the tolerance zone');
    }
    return event;
  }

  async receive(event: Stripe.Event): Promise<EventOutcome> {
    const outcome = await this.db.transaction().execute(async (trx) => {
      const first = await repo.recordEvent(trx, { id: event.id, type: event.type, createdAt: new Date(event.created * 1000), outcome: 'received' });
      if (!first) return 'duplicate' as const;
      const applied = await this.apply(trx, event);
      await repo.setEventOutcome(trx, event.id, applied);
      return applied;
    });
    this.log(outcome === 'unmatched' ? 'warn' : 'info', 'billing event received', { eventId: event.id, type: event.type, outcome });
    return outcome;
  }

  private apply(trx: Database, event: Stripe.Event): Promise<EventOutcome> {
    const object = obj(event.data.object);
    const at = new Date(event.created * 1000);
    switch (event.type) {
      case 'checkout.session.completed':
        return this.checkoutCompleted(trx, object);
      case 'customer.subscription.created':
      case 'customer.subscription.updated':
      case 'customer.subscription.paused':
      case 'customer.subscription.resumed':
      case 'customer.subscription.deleted':
        return this.subscriptionChanged(trx, object, at, event.type === 'customer.subscription.deleted');
      case 'invoice.paid':
      case 'invoice.payment_failed':
        return this.invoiceSettled(trx, object, at, event.type === 'invoice.paid' ? 'paid' : 'payment_failed');
      case 'payment_intent.succeeded':
        return this.topUp(trx, object);
      default:
        return Promise.resolve('ignored');
    }
  }

  /** A checkout tells which user a customer is (`client_reference_id`). */
  private async checkoutCompleted(trx: Database, session: Loose): Promise<EventOutcome> {
    const customerId = idOf(session.customer);
    const userId = str(session.client_reference_id);
    if (!customerId || !userId) return 'ignored';
    await repo.linkCustomer(trx, customerId, userId);
    return 'applied';
  }

  private async subscriptionChanged(trx: Database, subscription: Loose, at: Date, deleted: boolean): Promise<EventOutcome> {
    const id = str(subscription.id);
    const customerId = idOf(subscription.customer);
    if (!id || !customerId) return 'ignored';
    const userId = str(obj(subscription.metadata).userId);
    if (userId) await repo.linkCustomer(trx, customerId, userId);
    // Newer API versions keep the period on the subscription's items.
    const item = obj((obj(subscription.items).data as unknown[] | undefined)?.[0]);
    const priceId = idOf(item.price);
    const state = {
      customer_id: customerId,
      user_id: userId,
      price_id: priceId,
      plan: this.settings.plans.find((plan) => priceId !== null && plan.priceIds.includes(priceId))?.id ?? null,
      status: deleted ? 'canceled' : (str(subscription.status) ?? 'incomplete'),
      current_period_start: seconds(subscription.current_period_start ?? item.current_period_start),
      current_period_end: seconds(subscription.current_period_end ?? item.current_period_end),
      cancel_at_period_end: subscription.cancel_at_period_end === true,
      event_created_at: at,
      updated_at: new Date(),
    };
    if (priceId && !state.plan) this.log('warn', 'billing event names a price of no configured plan', { subscriptionId: id, priceId });
    if (await repo.insertSubscription(trx, { id, ...state })) return 'applied';
    const current = await repo.lockSubscription(trx, id);
    if (!current) return 'ignored';
    // Forward only: nothing follows a cancellation, and an older event never overwrites a newer one.
    if (current.status === 'canceled' || at < current.event_created_at) return 'stale';
    await repo.updateSubscription(trx, id, { ...state, user_id: state.user_id ?? current.user_id });
    return 'applied';
  }

  private async invoiceSettled(trx: Database, invoice: Loose, at: Date, status: 'paid' | 'payment_failed'): Promise<EventOutcome> {
    const subscriptionId =
      idOf(invoice.subscription) ?? idOf(obj(obj(invoice.parent).subscription_details).subscription);
    if (!subscriptionId) return 'ignored';
    const current = await repo.lockSubscription(trx, subscriptionId);
    if (!current) return 'unmatched';
    if (current.invoice_event_created_at && at < current.invoice_event_created_at) return 'stale';
    await repo.updateSubscription(trx, subscriptionId, {
      latest_invoice_status: status,
      latest_invoice_amount_cents: num(status === 'paid' ? invoice.amount_paid : invoice.amount_due) ?? 0,
      invoice_event_created_at: at,
      updated_at: new Date(),
    });
    return 'applied';
  }

  /**
   * A payment marked as a top-up (`metadata.kind: top_up`, with `metadata.userId` or a known
   * customer) adds what was received to the user's balance, once per payment.
   */
  private async topUp(trx: Database, payment: Loose): Promise<EventOutcome> {
    const metadata = obj(payment.metadata);
    if (metadata.kind !== 'top_up') return 'ignored';
    const paymentId = str(payment.id);
    const customerId = idOf(payment.customer);
    const userId = str(metadata.userId) ?? (customerId ? await repo.customerUser(trx, customerId) : null);
    const amount = num(payment.amount_received);
    if (!paymentId || !userId || amount === null || amount <= 0) return 'unmatched';
    if (str(payment.currency) !== this.settings.currency) {
      this.log('warn', 'top-up in another currency left unapplied', { paymentId, currency: payment.currency });
      return 'unmatched';
    }
    const reference = `top_up:${paymentId}`;
    if (await budgets.findLedgerEntryByReference(trx, reference)) return 'ignored';
    const budget = await budgets.lockBudget(trx, userId);
    await budgets.post(trx, budget, { amountCents: amount, kind: 'top_up', actorUserId: userId, reason: `Top-up ${paymentId}`, reference, at: new Date() });
    return 'applied';
  }
}
