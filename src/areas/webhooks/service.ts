import { randomUUID } from 'node:crypto';
import type { Transaction } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import { type Database, type DB, PgError, pgErrorCode } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import type { WebhookDispatcher } from './dispatcher';
import * as repo from './repository';
import type { Secrets } from '../../platform/secrets';
import { newSigningSecret, signingSecretContext } from './signing';
import { eventBody, type WebhookEventData, type WebhookEventType } from './events';

export type { WebhookEventData, WebhookEventType } from './events';

type CreateInput = RequestInput<'WebhookCreateRequest'>;
type UpdateInput = RequestInput<'WebhookUpdateRequest'>;

/** Subscriptions per user. */
export const MAX_SUBSCRIPTIONS = 25;
const TEST_EVENT = 'webhook.test';
const DEFAULT_GRACE_SECONDS = 86_400;

export interface DeliveryWithAttempts {
  delivery: repo.DeliveryRow;
  attempts: repo.AttemptRow[];
}

/**
 * Outgoing webhooks: subscriptions and their secrets, the outbox other areas write events into
 * (`emitEvent`, inside their own transaction), and the delivery log.
 */
export class WebhookService {
  constructor(
    private readonly db: Database,
    private readonly secrets: Secrets,
    private readonly dispatcher: WebhookDispatcher,
  ) {}

  async get(userId: string, subscriptionId: string): Promise<repo.SubscriptionRow> {
    const row = await repo.findSubscription(this.db, userId, subscriptionId);
    if (!row) throw errors.notFound('Webhook subscription not found.');
    return row;
  }

  async list(userId: string, page: PageRequest) {
    return repo.subscriptionList.page(this.db, { ownerUserId: userId }, page);
  }

  async create(userId: string, input: CreateInput): Promise<{ subscription: repo.SubscriptionRow; secret: string }> {
    await this.checkReceiver(input.url);
    if ((await repo.countSubscriptions(this.db, userId)) >= MAX_SUBSCRIPTIONS) {
      throw errors.conflict(`You already have ${MAX_SUBSCRIPTIONS} webhook subscriptions, the most a user may have.`);
    }
    const now = new Date();
    const secret = newSigningSecret();
    const id = uuidv7(now.getTime());
    const subscription = await withUniqueUrl(() =>
      repo.insertSubscription(this.db, {
        id,
        owner_user_id: userId,
        url: input.url,
        description: input.description ?? '',
        events: [...input.events].sort(),
        enabled: input.enabled ?? true,
        disabled_reason: input.enabled === false ? 'user' : null,
        disabled_at: input.enabled === false ? now : null,
        secret: this.secrets.seal(secret, signingSecretContext(id)),
        created_at: now,
        updated_at: now,
      }),
    );
    return { subscription, secret };
  }

  async update(userId: string, input: UpdateInput): Promise<repo.SubscriptionRow> {
    const current = await this.get(userId, input.subscriptionId);
    if (input.url !== undefined && input.url !== current.url) await this.checkReceiver(input.url);
    const now = new Date();
    const enabling = input.enabled === true && !current.enabled;
    const disabling = input.enabled === false && current.enabled;
    const updated = await withUniqueUrl(() =>
      repo.updateSubscription(this.db, userId, input.subscriptionId, {
        url: input.url,
        description: input.description,
        events: input.events ? [...input.events].sort() : undefined,
        enabled: input.enabled,
        // A new URL or a re-enabled subscription starts with a clean record.
        ...(input.url !== undefined && input.url !== current.url ? { failing_since: null } : {}),
        ...(enabling ? { disabled_reason: null, disabled_at: null, failing_since: null } : {}),
        ...(disabling ? { disabled_reason: 'user', disabled_at: now } : {}),
        updated_at: now,
      }),
    );
    if (!updated) throw errors.notFound('Webhook subscription not found.');
    return updated;
  }

  async delete(userId: string, subscriptionId: string): Promise<void> {
    if (!(await repo.deleteSubscription(this.db, userId, subscriptionId))) throw errors.notFound('Webhook subscription not found.');
  }

  async rotateSecret(userId: string, subscriptionId: string, graceSeconds = DEFAULT_GRACE_SECONDS) {
    const current = await this.get(userId, subscriptionId);
    const now = new Date();
    const secret = newSigningSecret();
    const subscription = await repo.updateSubscription(this.db, userId, subscriptionId, {
      secret: this.secrets.seal(secret, signingSecretContext(subscriptionId)),
      previous_secret: graceSeconds > 0 ? current.secret : null,
      previous_secret_expires_at: graceSeconds > 0 ? new Date(now.getTime() + graceSeconds * 1000) : null,
      updated_at: now,
    });
    if (!subscription) throw errors.notFound('Webhook subscription not found.');
    return { subscription, secret };
  }

  /**
   * Writes an event and one pending delivery per enabled subscription of `userId` that selected
   * `type`, in the caller's transaction: the event exists exactly when the change it reports was
   * committed. `data` has the type of `type`'s payload schema in the document, so a payload that
   * does not match it fails to compile. Returns the event id, or null when nobody subscribed.
   */
  async emitEvent<T extends WebhookEventType>(
    trx: Transaction<DB>,
    type: T,
    userId: string,
    data: WebhookEventData<T>,
  ): Promise<string | null> {
    const subscribers = await repo.subscribersOf(trx, userId, type);
    if (subscribers.length === 0) return null;
    const now = new Date();
    const eventId = `msg_${uuidv7(now.getTime())}`;
    await repo.insertEvent(trx, { id: eventId, owner_user_id: userId, type, body: eventBody(eventId, type, now, data), created_at: now });
    await repo.insertDeliveries(
      trx,
      subscribers.map(({ id }) => ({
        id: uuidv7(now.getTime()),
        subscription_id: id,
        event_id: eventId,
        owner_user_id: userId,
        status: 'pending',
        max_attempts: this.maxAttempts,
        next_attempt_at: now,
        created_at: now,
        updated_at: now,
      })),
    );
    return eventId;
  }

  /** Sends a `webhook.test` event to the subscription now (one attempt) and returns the delivery. */
  async sendTest(userId: string, subscriptionId: string): Promise<DeliveryWithAttempts> {
    await this.get(userId, subscriptionId);
    const now = new Date();
    const eventId = `msg_${uuidv7(now.getTime())}`;
    const deliveryId = uuidv7(now.getTime());
    const token = randomUUID();
    // Written already claimed by this request, so no worker races it for the attempt.
    await this.db.transaction().execute(async (trx) => {
      await repo.insertEvent(trx, {
        id: eventId,
        owner_user_id: userId,
        type: TEST_EVENT,
        body: eventBody(eventId, TEST_EVENT, now, { subscriptionId }),
        created_at: now,
      });
      await repo.insertDeliveries(trx, [
        {
          id: deliveryId,
          subscription_id: subscriptionId,
          event_id: eventId,
          owner_user_id: userId,
          status: 'pending',
          is_test: true,
          attempt_count: 1,
          max_attempts: 1,
          next_attempt_at: new Date(now.getTime() + this.dispatcher.leaseMs),
          lease_token: token,
          created_at: now,
          updated_at: now,
        },
      ]);
    });
    const claimed: repo.Claimed = {
      id: deliveryId,
      subscription_id: subscriptionId,
      event_id: eventId,
      is_test: true,
      attempt_count: 1,
      max_attempts: 1,
      previous_lease_token: null,
    };
    await this.dispatcher.attempt({ claimed, token });
    return this.getDelivery(userId, deliveryId);
  }

  async getDelivery(userId: string, deliveryId: string): Promise<DeliveryWithAttempts> {
    const found = await this.snapshot(async (trx) => {
      const delivery = await repo.findDelivery(trx, userId, deliveryId);
      return delivery ? { delivery, attempts: await repo.attemptsOf(trx, [deliveryId]) } : undefined;
    });
    if (!found) throw errors.notFound('Webhook delivery not found.');
    return found;
  }

  async listDeliveries(userId: string, filter: { subscriptionId?: string; status?: repo.DeliveryStatus }, page: PageRequest) {
    if (filter.subscriptionId !== undefined) await this.get(userId, filter.subscriptionId);
    return this.snapshot(async (trx) => {
      const { items, nextCursor } = await repo.deliveryList.page(trx, { ownerUserId: userId, ...filter }, page);
      const attempts = await repo.attemptsOf(
        trx,
        items.map((d) => d.id),
      );
      const byDelivery = new Map<string, repo.AttemptRow[]>();
      for (const attempt of attempts) byDelivery.set(attempt.delivery_id, [...(byDelivery.get(attempt.delivery_id) ?? []), attempt]);
      return { items: items.map((delivery) => ({ delivery, attempts: byDelivery.get(delivery.id) ?? [] })), nextCursor };
    });
  }

  /** Reads deliveries and their attempts as of one moment, while workers keep recording attempts. */
  private snapshot<T>(read: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
    return this.db.transaction().setIsolationLevel('repeatable read').execute(read);
  }

  /** Queues a finished delivery's event again for its subscription, as a new delivery. */
  async redeliver(userId: string, deliveryId: string): Promise<DeliveryWithAttempts> {
    const { delivery } = await this.getDelivery(userId, deliveryId);
    if (delivery.status === 'pending') throw errors.conflict('This delivery is still pending; it is retried on its schedule.');
    const subscription = await this.get(userId, delivery.subscription_id);
    if (!subscription.enabled) throw errors.conflict('The subscription is disabled; enable it before redelivering.');
    const now = new Date();
    const id = uuidv7(now.getTime());
    try {
      await repo.insertDeliveries(this.db, [
        {
          id,
          subscription_id: delivery.subscription_id,
          event_id: delivery.event_id,
          owner_user_id: userId,
          status: 'pending',
          is_test: delivery.is_test,
          max_attempts: delivery.is_test ? 1 : this.maxAttempts,
          next_attempt_at: now,
          created_at: now,
          updated_at: now,
        },
      ]);
    } catch (error) {
      if (pgErrorCode(error) === PgError.uniqueViolation) {
        throw errors.conflict('This event already has a pending delivery to the subscription.');
      }
      throw error;
    }
    return this.getDelivery(userId, id);
  }

  private get maxAttempts(): number {
    return this.dispatcher.settings.retryScheduleMs.length + 1;
  }

  /** Refuses a receiver URL that is malformed or reaches a non-public address (400). */
  private async checkReceiver(url: string): Promise<void> {
    const refused = await this.dispatcher.outbound.whyRefused(url, Math.min(this.dispatcher.settings.timeoutMs, 5000));
    if (refused) throw errors.invalidRequest('The webhook URL is not allowed.', [{ path: '/body/url', message: refused }]);
  }
}

/** Runs a write whose only expected failure is the per-user unique URL. */
async function withUniqueUrl<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (pgErrorCode(error) === PgError.uniqueViolation) {
      throw errors.conflict('You already have a webhook subscription for this URL; change its events instead.');
    }
    throw error;
  }
}
