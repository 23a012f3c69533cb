import Stripe from 'stripe';
import { type ErrorDetail, errors } from '../../platform/errors';
import type { Database } from '../../platform/db';
import * as budgets from '../budgets/service';
import * as repo from './repository';
import type { Plan } from './service';

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
const obj = (value: unknown): Loose => (typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Loose) : {});

/** The longest id or status the service stores (Stripe's are far shorter; index keys have a size limit). */
const MAX_TOKEN_LENGTH = 255;
/** The latest provider timestamp accepted, in seconds: 9999-12-31T23:59:59Z. */
const MAX_SECONDS = 253_402_300_799;
/** NUL, which Postgres text cannot hold, and UTF-16 surrogates without their pair. */
const UNSTORABLE = /\u0000|\p{Cs}/u;

/**
 * Reads the fields of an event that the service uses, noting each that is malformed: an absent
 * (or `null`, or empty) field reads as `null`, as the API versions that omit it send it; a present
 * one of the wrong type or range is an error, so that nothing the service stores or adds up comes
 * from a value that does not fit.
 */
class EventReader {
  readonly details: ErrorDetail[] = [];

  private fail(path: string, message: string): null {
    this.details.push({ path, message });
    return null;
  }

  /** A string id (or status, type, currency): at most 255 characters, no NUL, no lone surrogate. */
  token(value: unknown, path: string): string | null {
    if (value === undefined || value === null || value === '') return null;
    if (typeof value !== 'string') return this.fail(path, 'must be a string');
    if (value.length > MAX_TOKEN_LENGTH) return this.fail(path, `must be at most ${MAX_TOKEN_LENGTH} characters`);
    if (UNSTORABLE.test(value)) return this.fail(path, 'must not contain NUL characters or unpaired surrogates');
    return value;
  }

  /** An id field that may be expanded into its object. */
  idOf(value: unknown, path: string): string | null {
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? this.token((value as Loose).id, `${path}/id`)
      : this.token(value, path);
  }

  /** A time in whole seconds since the epoch. */
  seconds(value: unknown, path: string): Date | null {
    if (value === undefined || value === null) return null;
    if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > MAX_SECONDS) {
      return this.fail(path, 'must be a whole number of seconds since 1970, before the year 10000');
    }
    return new Date((value as number) * 1000);
  }

  /** An amount in whole cents, from 0 to `max`. */
  cents(value: unknown, path: string, max: number): number | null {
    if (value === undefined || value === null) return null;
    if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > max) {
      return this.fail(path, `must be a whole number of cents from 0 to ${max}`);
    }
    return value as number;
  }
}

/** What an event asks for, read and checked in full before anything is written. */
type Change =
  | { kind: 'checkout'; customerId: string | null; userId: string | null }
  | {
      kind: 'subscription';
      id: string | null;
      customerId: string | null;
      userId: string | null;
      priceId: string | null;
      status: string;
      /** The status before this change, from an update's `previous_attributes`. */
      previousStatus: string | null;
      /** A `customer.subscription.created` event: the subscription's first state. */
      creation: boolean;
      periodStart: Date | null;
      periodEnd: Date | null;
      cancelAtPeriodEnd: boolean;
    }
  | { kind: 'invoice'; subscriptionId: string | null; status: 'paid' | 'payment_failed'; amountCents: number }
  | {
      kind: 'top_up';
      paymentId: string | null;
      customerId: string | null;
      userId: string | null;
      amountCents: number | null;
      currency: string | null;
    }
  | { kind: 'none' };

/** A verified event whose envelope and used fields are well formed. */
export interface CheckedEvent {
  id: string;
  type: string;
  created: Date;
  change: Change;
}

/**
 * Stripe's subscription statuses in the order its lifecycle moves them: `incomplete` until the
 * first payment, then `trialing` (which may end `paused` without a payment method), `active`, and
 * on failed renewals `past_due`, then `unpaid`. A return to `active` (a late payment, a resume)
 * is the only move backwards.
 */
const LIFECYCLE_RANK: Record<string, number> = { incomplete: 0, trialing: 1, paused: 2, active: 3, past_due: 4, unpaid: 5 };
/** Statuses nothing follows: a subscription that ended is never revived. */
const TERMINAL_STATUSES = new Set(['canceled', 'incomplete_expired']);

/**
 * Whether a subscription event supersedes the stored state. Events are ordered by their `created`
 * second; a terminal status wins whenever it arrives and nothing replaces it. Stripe often stamps
 * several events of one subscription with the same second (`created` incomplete and `updated`
 * active), and delivers them in any order, so a tie is broken by the lifecycle: the creation event
 * never replaces a state of its own second; an update whose `previous_attributes.status` is the
 * stored status is the move out of it; otherwise the status further along the lifecycle wins, and
 * between equal statuses the later delivery. (A move backwards within one second delivered out of
 * order, e.g. past_due then active, cannot be told apart and keeps the further status.)
 */
function supersedes(
  current: { status: string; at: Date },
  incoming: { status: string; at: Date; creation: boolean; previousStatus: string | null },
): boolean {
  if (TERMINAL_STATUSES.has(current.status)) return false;
  if (TERMINAL_STATUSES.has(incoming.status)) return true;
  if (incoming.at.getTime() !== current.at.getTime()) return incoming.at > current.at;
  if (incoming.creation) return false;
  if (incoming.previousStatus !== null && incoming.previousStatus === current.status && incoming.status !== current.status) return true;
  const [from, to] = [LIFECYCLE_RANK[current.status], LIFECYCLE_RANK[incoming.status]];
  return from === undefined || to === undefined || to >= from;
}

/**
 * Inbound Stripe events: the signature is checked on the raw body with the official library
 * (within the tolerance window), then every field the service uses is checked (a malformed event
 * is `400 invalid_request` with details and changes nothing); each event id is stored once in the
 * transaction that applies it (a redelivery, even a concurrent one, changes nothing), and
 * subscription and invoice state only moves forward (see `supersedes`).
 */
export class StripeEvents {
  constructor(
    private readonly db: Database,
    private readonly settings: StripeSettings,
    private readonly log: Log,
  ) {}

  /**
   * The verified, checked event; `400 invalid_signature` for a missing, wrong or stale signature,
   * `400 invalid_request` with a detail per malformed field for a signed body that is not a usable
   * event (no retry could make it one, and nothing of it reaches the database).
   */
  verify(rawBody: Buffer, signature: string | undefined, now = Date.now()): CheckedEvent {
    let event: unknown;
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
    return this.check(event);
  }

  private check(event: unknown): CheckedEvent {
    const read = new EventReader();
    if (typeof event !== 'object' || event === null || Array.isArray(event)) {
      throw errors.invalidRequest('The body is not a Stripe event.', [{ path: '/', message: 'must be an event object' }]);
    }
    const envelope = event as Loose;
    const id = read.token(envelope.id, '/id');
    const type = read.token(envelope.type, '/type');
    const created = read.seconds(envelope.created, '/created');
    const data = obj(envelope.data);
    const object = data.object;
    for (const [value, path] of [
      [id, '/id'],
      [type, '/type'],
      [created, '/created'],
    ] as const) {
      if (value === null && !read.details.some((detail) => detail.path === path)) read.details.push({ path, message: 'is required' });
    }
    if (typeof object !== 'object' || object === null || Array.isArray(object))
      read.details.push({ path: '/data/object', message: 'must be an object' });
    const change = type === null ? ({ kind: 'none' } as const) : this.readChange(read, type, obj(object), obj(data.previous_attributes));
    if (read.details.length > 0 || id === null || type === null || created === null) {
      throw errors.invalidRequest('The body is not a well-formed Stripe event.', read.details);
    }
    return { id, type, created, change };
  }

  /** The fields the event's type uses, from its `data.object` (at `/data/object`). */
  private readChange(read: EventReader, type: string, object: Loose, previous: Loose): Change {
    const at = '/data/object';
    switch (type) {
      case 'checkout.session.completed':
        return {
          kind: 'checkout',
          customerId: read.idOf(object.customer, `${at}/customer`),
          userId: read.token(object.client_reference_id, `${at}/client_reference_id`),
        };
      case 'customer.subscription.created':
      case 'customer.subscription.updated':
      case 'customer.subscription.paused':
      case 'customer.subscription.resumed':
      case 'customer.subscription.deleted': {
        // Newer API versions keep the period on the subscription's items.
        const items = obj(object.items).data;
        const item = obj(Array.isArray(items) ? items[0] : undefined);
        const status = read.token(object.status, `${at}/status`);
        return {
          kind: 'subscription',
          id: read.token(object.id, `${at}/id`),
          customerId: read.idOf(object.customer, `${at}/customer`),
          userId: read.token(obj(object.metadata).userId, `${at}/metadata/userId`),
          priceId: read.idOf(item.price, `${at}/items/data/0/price`),
          status: type === 'customer.subscription.deleted' ? 'canceled' : (status ?? 'incomplete'),
          previousStatus: typeof previous.status === 'string' ? previous.status : null,
          creation: type === 'customer.subscription.created',
          periodStart:
            object.current_period_start != null
              ? read.seconds(object.current_period_start, `${at}/current_period_start`)
              : read.seconds(item.current_period_start, `${at}/items/data/0/current_period_start`),
          periodEnd:
            object.current_period_end != null
              ? read.seconds(object.current_period_end, `${at}/current_period_end`)
              : read.seconds(item.current_period_end, `${at}/items/data/0/current_period_end`),
          cancelAtPeriodEnd: object.cancel_at_period_end === true,
        };
      }
      case 'invoice.paid':
      case 'invoice.payment_failed': {
        const paid = type === 'invoice.paid';
        const amountField = paid ? 'amount_paid' : 'amount_due';
        const parentSubscription = obj(obj(object.parent).subscription_details).subscription;
        return {
          kind: 'invoice',
          subscriptionId:
            read.idOf(object.subscription, `${at}/subscription`) ??
            read.idOf(parentSubscription, `${at}/parent/subscription_details/subscription`),
          status: paid ? 'paid' : 'payment_failed',
          amountCents: read.cents(object[amountField], `${at}/${amountField}`, Number.MAX_SAFE_INTEGER) ?? 0,
        };
      }
      case 'payment_intent.succeeded': {
        const metadata = obj(object.metadata);
        // Only top-ups are read further; other payments are acknowledged as they are.
        if (metadata.kind !== 'top_up') return { kind: 'none' };
        return {
          kind: 'top_up',
          paymentId: read.token(object.id, `${at}/id`),
          customerId: read.idOf(object.customer, `${at}/customer`),
          userId: read.token(metadata.userId, `${at}/metadata/userId`),
          amountCents: read.cents(object.amount_received, `${at}/amount_received`, budgets.MAX_POSTING_CENTS),
          currency: read.token(object.currency, `${at}/currency`),
        };
      }
      default:
        return { kind: 'none' };
    }
  }

  async receive(event: CheckedEvent): Promise<EventOutcome> {
    const outcome = await this.db.transaction().execute(async (trx) => {
      const first = await repo.recordEvent(trx, { id: event.id, type: event.type, createdAt: event.created, outcome: 'received' });
      if (!first) return 'duplicate' as const;
      const applied = await this.apply(trx, event.change, event.created);
      await repo.setEventOutcome(trx, event.id, applied);
      return applied;
    });
    this.log(outcome === 'unmatched' ? 'warn' : 'info', 'billing event received', { eventId: event.id, type: event.type, outcome });
    return outcome;
  }

  private apply(trx: Database, change: Change, at: Date): Promise<EventOutcome> {
    switch (change.kind) {
      case 'checkout':
        return this.checkoutCompleted(trx, change);
      case 'subscription':
        return this.subscriptionChanged(trx, change, at);
      case 'invoice':
        return this.invoiceSettled(trx, change, at);
      case 'top_up':
        return this.topUp(trx, change);
      case 'none':
        return Promise.resolve('ignored');
    }
  }

  /** A checkout tells which user a customer is (`client_reference_id`). */
  private async checkoutCompleted(trx: Database, { customerId, userId }: Extract<Change, { kind: 'checkout' }>): Promise<EventOutcome> {
    if (!customerId || !userId) return 'ignored';
    await repo.linkCustomer(trx, customerId, userId);
    return 'applied';
  }

  private async subscriptionChanged(trx: Database, change: Extract<Change, { kind: 'subscription' }>, at: Date): Promise<EventOutcome> {
    const { id, customerId, userId, priceId } = change;
    if (!id || !customerId) return 'ignored';
    if (userId) await repo.linkCustomer(trx, customerId, userId);
    const state = {
      customer_id: customerId,
      user_id: userId,
      price_id: priceId,
      plan: this.settings.plans.find((plan) => priceId !== null && plan.priceIds.includes(priceId))?.id ?? null,
      status: change.status,
      current_period_start: change.periodStart,
      current_period_end: change.periodEnd,
      cancel_at_period_end: change.cancelAtPeriodEnd,
      event_created_at: at,
      updated_at: new Date(),
    };
    if (priceId && !state.plan) this.log('warn', 'billing event names a price of no configured plan', { subscriptionId: id, priceId });
    if (await repo.insertSubscription(trx, { id, ...state })) return 'applied';
    const current = await repo.lockSubscription(trx, id);
    if (!current) return 'ignored';
    if (!supersedes({ status: current.status, at: current.event_created_at }, { ...change, at })) return 'stale';
    await repo.updateSubscription(trx, id, { ...state, user_id: state.user_id ?? current.user_id });
    return 'applied';
  }

  private async invoiceSettled(
    trx: Database,
    { subscriptionId, status, amountCents }: Extract<Change, { kind: 'invoice' }>,
    at: Date,
  ): Promise<EventOutcome> {
    if (!subscriptionId) return 'ignored';
    const current = await repo.lockSubscription(trx, subscriptionId);
    if (!current) return 'unmatched';
    if (current.invoice_event_created_at && at < current.invoice_event_created_at) return 'stale';
    await repo.updateSubscription(trx, subscriptionId, {
      latest_invoice_status: status,
      latest_invoice_amount_cents: amountCents,
      invoice_event_created_at: at,
      updated_at: new Date(),
    });
    return 'applied';
  }

  /**
   * A payment marked as a top-up (`metadata.kind: top_up`, with `metadata.userId` or a known
   * customer) adds what was received (at most `MAX_POSTING_CENTS`, as an admin adjustment) to the
   * user's balance, once per payment.
   */
  private async topUp(
    trx: Database,
    { paymentId, customerId, userId: named, amountCents, currency }: Extract<Change, { kind: 'top_up' }>,
  ): Promise<EventOutcome> {
    const userId = named ?? (customerId ? await repo.customerUser(trx, customerId) : null);
    if (!paymentId || !userId || amountCents === null || amountCents <= 0) return 'unmatched';
    if (currency !== this.settings.currency) {
      this.log('warn', 'top-up in another currency left unapplied', { paymentId, currency });
      return 'unmatched';
    }
    const reference = `top_up:${paymentId}`;
    const applied = await budgets.topUp(trx, userId, { amountCents, reason: `Top-up ${paymentId}`, reference, at: new Date() });
    return applied ? 'applied' : 'ignored';
  }
}
