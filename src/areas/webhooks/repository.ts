import { type Insertable, type Selectable, sql, type Transaction, type Updateable } from 'kysely';
import type { WebhookDeliveries, WebhookDeliveryAttempts, WebhookEvents, WebhookSubscriptions } from '../../../generated/db';
import type { QueryOf } from '../../platform/api-types';
import type { Database, DB } from '../../platform/db';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';
import { epochMs, epochMsOrNull } from '../../platform/db/timestamps';

export type SubscriptionRow = Selectable<WebhookSubscriptions>;

export type AttemptRow = Selectable<WebhookDeliveryAttempts>;
export type DeliveryStatus = NonNullable<QueryOf<'getWebhookDeliveries'>['status']>;
export type DeliveryRow = Selectable<WebhookDeliveries> & { event_type: string; event_body: string };

// ---- subscriptions ----

export const { find: findSubscription, update: updateSubscription, remove: deleteSubscription } = ownedRecords('webhook_subscriptions');

/** The owner's webhook subscriptions; read a page at a time (never their secrets). */
export const subscriptionList = ownedList('webhook_subscriptions', {
  fields: ['url', 'description', 'events', 'enabled', 'disabled_reason'],
  times: ['failing_since', 'disabled_at', 'previous_secret_expires_at', 'created_at', 'updated_at'],
});
export type SubscriptionView = ListedRecord<'webhook_subscriptions', typeof subscriptionList>;

export async function countSubscriptions(db: Database, ownerUserId: string): Promise<number> {
  const row = await db
    .selectFrom('webhook_subscriptions')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('owner_user_id', '=', ownerUserId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

export function insertSubscription(db: Database, row: Insertable<WebhookSubscriptions>) {
  return db.insertInto('webhook_subscriptions').values(row).returningAll().executeTakeFirstOrThrow();
}

/** The enabled subscriptions of a user that selected an event kind. */
export function subscribersOf(trx: Transaction<DB>, ownerUserId: string, type: string) {
  return trx
    .selectFrom('webhook_subscriptions')
    .select('id')
    .where('owner_user_id', '=', ownerUserId)
    .where('enabled', '=', true)
    .where(sql<boolean>`events @> array[${type}]::text[]`)
    .execute();
}

// ---- the outbox ----

export function insertEvent(trx: Database, row: Insertable<WebhookEvents>) {
  return trx.insertInto('webhook_events').values(row).execute();
}

export function insertDeliveries(trx: Database, rows: Insertable<WebhookDeliveries>[]) {
  return trx.insertInto('webhook_deliveries').values(rows).execute();
}

function deliveriesWithEvents(db: Database) {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .select(['e.type as event_type', 'e.body as event_body']);
}

export function findDelivery(db: Database, ownerUserId: string, id: string): Promise<DeliveryRow | undefined> {
  return deliveriesWithEvents(db).selectAll('d').where('d.owner_user_id', '=', ownerUserId).where('d.id', '=', id).executeTakeFirst();
}

/** What a delivery is presented with: the list reads only these (not its lease), and its times as epoch milliseconds. */
const DELIVERY_FIELDS = ['d.id', 'd.subscription_id', 'd.event_id', 'd.status'] as const;

/** The owner's deliveries with their events, filtered; read a page at a time. */
export const deliveryList = listQuery({
  id: 'd.id',
  rows: (db, { ownerUserId, subscriptionId, status }: { ownerUserId: string; subscriptionId?: string; status?: DeliveryStatus }) => {
    let query = deliveriesWithEvents(db)
      .select([
        ...DELIVERY_FIELDS,
        epochMs('d.next_attempt_at'),
        epochMs('d.created_at'),
        epochMs('d.updated_at'),
        epochMsOrNull('d.completed_at'),
      ])
      .where('d.owner_user_id', '=', ownerUserId);
    if (subscriptionId !== undefined) query = query.where('d.subscription_id', '=', subscriptionId);
    if (status !== undefined) query = query.where('d.status', '=', sql.lit(status)); // a closed set, written in as ownedList does
    return query;
  },
});
export type DeliveryView = ListedRecord<DeliveryRow, typeof deliveryList>;

export function attemptsOf(db: Database, deliveryIds: string[]): Promise<AttemptRow[]> {
  if (deliveryIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('webhook_delivery_attempts')
    .selectAll()
    .where('delivery_id', 'in', deliveryIds)
    .orderBy('delivery_id')
    .orderBy('attempt')
    .execute();
}

// ---- delivery workers ----

export interface Claimed {
  id: string;
  subscription_id: string;
  event_id: string;
  is_test: boolean;
  attempt_count: number;
  max_attempts: number;
  /** Set when the previous attempt was claimed but never recorded (its instance stopped). */
  previous_lease_token: string | null;
}

/**
 * Claims up to `limit` due deliveries for one attempt each: skips rows other workers hold, and
 * deliveries of disabled subscriptions (except tests); moves `next_attempt_at` to the end of the
 * lease, so a delivery whose worker stops is due again after it. One statement, atomic without a
 * transaction around it (which would add two round trips to every poll and hold the connection
 * idle in a transaction between them).
 */
export async function claimDue(db: Database, now: Date, leaseUntil: Date, token: string, limit: number): Promise<Claimed[]> {
  const result = await sql<Claimed>`
    with due as (
      select d.id, d.lease_token
      from webhook_deliveries d
      join webhook_subscriptions s on s.id = d.subscription_id
      where d.status = 'pending' and d.next_attempt_at <= ${now} and (s.enabled or d.is_test)
      order by d.next_attempt_at
      limit ${limit}
      for update of d skip locked
    )
    update webhook_deliveries w
    set lease_token = ${token}, next_attempt_at = ${leaseUntil}, attempt_count = w.attempt_count + 1, updated_at = ${now}
    from due
    where w.id = due.id
    returning w.id, w.subscription_id, w.event_id, w.is_test, w.attempt_count, w.max_attempts,
      due.lease_token as previous_lease_token`.execute(db);
  return result.rows;
}

/** What an attempt needs: the body to send and the subscription's URL and sealed secrets. */
export function sendingContext(db: Database, deliveryId: string) {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .innerJoin('webhook_subscriptions as s', 's.id', 'd.subscription_id')
    .select([
      'e.id as event_id',
      'e.body',
      's.id as subscription_id',
      's.url',
      's.secret',
      's.previous_secret',
      's.previous_secret_expires_at',
    ])
    .where('d.id', '=', deliveryId)
    .executeTakeFirst();
}

export function insertAttempt(db: Database, row: Insertable<WebhookDeliveryAttempts>) {
  return db
    .insertInto('webhook_delivery_attempts')
    .values(row)
    .onConflict((oc) => oc.doNothing())
    .execute();
}

/** Extends the lease of an attempt in progress, if this worker still holds it. */
export async function renewLease(db: Database, id: string, token: string, leaseUntil: Date): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ next_attempt_at: leaseUntil })
    .where('id', '=', id)
    .where('lease_token', '=', token)
    .where('status', '=', 'pending')
    .execute();
}

/** Ends the current attempt of a delivery, if this worker still holds its lease. */
export async function releaseDelivery(
  trx: Transaction<DB>,
  id: string,
  token: string,
  changes: Updateable<WebhookDeliveries>,
): Promise<boolean> {
  const result = await trx
    .updateTable('webhook_deliveries')
    .set({ ...changes, lease_token: null })
    .where('id', '=', id)
    .where('lease_token', '=', token)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export function updateSubscriptionById(trx: Transaction<DB>, id: string, changes: Updateable<WebhookSubscriptions>) {
  return trx.updateTable('webhook_subscriptions').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

/** Deletes finished deliveries completed before `cutoff`, and events left without deliveries. */
export async function pruneBefore(db: Database, cutoff: Date, batch: number): Promise<number> {
  const deleted = await sql<{ id: string }>`
    delete from webhook_deliveries where id in (
      select id from webhook_deliveries where status <> 'pending' and completed_at < ${cutoff} limit ${batch})
    returning id`.execute(db);
  await sql`
    delete from webhook_events e where e.id in (
      select id from webhook_events where created_at < ${cutoff}
        and not exists (select 1 from webhook_deliveries d where d.event_id = webhook_events.id)
      limit ${batch})`.execute(db);
  return deleted.rows.length;
}

/**
 * Records a successful attempt in one statement (the common case, so one round trip instead of a
 * transaction of four): ends the delivery if this worker still holds its lease, logs the attempt,
 * and clears the subscription's failing state. Nothing is written when the lease had run out.
 */
export async function recordSuccess(
  db: Database,
  claim: { id: string; token: string; subscriptionId: string },
  attempt: Insertable<WebhookDeliveryAttempts>,
  now: Date,
): Promise<void> {
  await sql`
    with released as (
      update webhook_deliveries
      set status = 'succeeded', attempt_count = ${attempt.attempt}, next_attempt_at = ${now}, completed_at = ${now}, updated_at = ${now}
      where id = ${claim.id} and lease_token = ${claim.token}
      returning id
    ), logged as (
      insert into webhook_delivery_attempts (delivery_id, attempt, attempted_at, outcome, response_status, response_body, latency_ms, error)
      select id, ${attempt.attempt}, ${attempt.attempted_at}, ${attempt.outcome}, ${attempt.response_status ?? null}, ${attempt.response_body ?? null},
             ${attempt.latency_ms ?? null}, ${attempt.error ?? null}
      from released
      on conflict do nothing
    )
    update webhook_subscriptions set failing_since = null
    where id = ${claim.subscriptionId} and failing_since is not null and exists (select 1 from released)`.execute(db);
}

/** A delivery to the subscription succeeded: it is no longer failing. */
export async function clearFailing(db: Database, subscriptionId: string): Promise<void> {
  await db
    .updateTable('webhook_subscriptions')
    .set({ failing_since: null })
    .where('id', '=', subscriptionId)
    .where('failing_since', 'is not', null)
    .execute();
}

/** A delivery to the subscription failed: it is failing since `at` unless it already was; returns whether it is enabled and since when it fails. */
export function markFailing(db: Database, subscriptionId: string, at: Date) {
  return db
    .updateTable('webhook_subscriptions')
    .set((eb) => ({ failing_since: eb.fn.coalesce('failing_since', eb.val(at)) }))
    .where('id', '=', subscriptionId)
    .returning(['enabled', 'failing_since'])
    .executeTakeFirst();
}

/** Deliveries waiting to be sent, across all users (a metric). */
export async function countPendingDeliveries(db: Database): Promise<number> {
  const row = await db
    .selectFrom('webhook_deliveries')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('status', '=', 'pending')
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}
