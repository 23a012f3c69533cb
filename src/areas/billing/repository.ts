import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import type { BillingSubscriptions } from '../../../generated/db';
import type { ChatUsage, ModelInfo } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';

export type SubscriptionRow = Selectable<BillingSubscriptions>;

/** Provider statuses under which the subscribed plan's entitlements apply. */
export const ENTITLED_STATUSES = ['active', 'trialing', 'past_due'] as const;

/**
 * The user's current subscription: one that entitles them if any, else the newest; found by the
 * user id its metadata carried or through the customer the user checked out as.
 */
export function findUserSubscription(db: Database, userId: string): Promise<SubscriptionRow | undefined> {
  return db
    .selectFrom('billing_subscriptions')
    .selectAll()
    .where((eb) =>
      eb.or([
        eb('user_id', '=', userId),
        eb('customer_id', 'in', eb.selectFrom('billing_customers').select('customer_id').where('user_id', '=', userId)),
      ]),
    )
    .orderBy((eb) => eb('status', 'in', ENTITLED_STATUSES), 'desc')
    .orderBy('event_created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/** Inserts the subscription unless it is known; true when inserted. */
export async function insertSubscription(db: Database, row: Insertable<BillingSubscriptions>): Promise<boolean> {
  const inserted = await db
    .insertInto('billing_subscriptions')
    .values(row)
    .onConflict((oc) => oc.column('id').doNothing())
    .returning('id')
    .executeTakeFirst();
  return inserted !== undefined;
}

export function lockSubscription(db: Database, id: string): Promise<SubscriptionRow | undefined> {
  return db.selectFrom('billing_subscriptions').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
}

export async function updateSubscription(db: Database, id: string, patch: Updateable<BillingSubscriptions>): Promise<void> {
  await db.updateTable('billing_subscriptions').set(patch).where('id', '=', id).execute();
}

/** Records a verified event once; false when its id was already recorded (a redelivery). */
export async function recordEvent(db: Database, event: { id: string; type: string; createdAt: Date; outcome: string }): Promise<boolean> {
  const inserted = await db
    .insertInto('billing_events')
    .values({ id: event.id, type: event.type, provider_created_at: event.createdAt, outcome: event.outcome })
    .onConflict((oc) => oc.column('id').doNothing())
    .returning('id')
    .executeTakeFirst();
  return inserted !== undefined;
}

export async function setEventOutcome(db: Database, id: string, outcome: string): Promise<void> {
  await db.updateTable('billing_events').set({ outcome }).where('id', '=', id).execute();
}

/** Remembers which user a provider customer is; the first mapping stays. */
export async function linkCustomer(db: Database, customerId: string, userId: string): Promise<void> {
  await db
    .insertInto('billing_customers')
    .values({ customer_id: customerId, user_id: userId })
    .onConflict((oc) => oc.column('customer_id').doNothing())
    .execute();
}

export async function customerUser(db: Database, customerId: string): Promise<string | null> {
  const row = await db.selectFrom('billing_customers').select('user_id').where('customer_id', '=', customerId).executeTakeFirst();
  return row?.user_id ?? null;
}

export function findSettings(db: Database, userId: string) {
  return db.selectFrom('billing_settings').selectAll().where('user_id', '=', userId).executeTakeFirst();
}

export function upsertSettings(db: Database, userId: string, limitCents: number | null, at: Date) {
  return db
    .insertInto('billing_settings')
    .values({ user_id: userId, monthly_spending_limit_cents: limitCents, updated_at: at })
    .onConflict((oc) => oc.column('user_id').doUpdateSet({ monthly_spending_limit_cents: limitCents, updated_at: at }))
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Declared bytes of the user's files, pending or stored (folders have none), and of their outputs. */
export async function storageUsed(db: Database, userId: string): Promise<number> {
  const bytes = (table: 'files' | 'outputs') =>
    sql<number>`(select coalesce(sum(size_bytes), 0) from ${sql.table(table)} where owner_user_id = ${userId})`;
  const row = await db.selectNoFrom(sql<number>`${bytes('files')} + ${bytes('outputs')}`.as('bytes')).executeTakeFirst();
  return Number(row?.bytes ?? 0);
}

export async function automationCount(db: Database, userId: string): Promise<number> {
  const row = await db
    .selectFrom('automations')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('owner_user_id', '=', userId)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * The charged actions: a chat reply, a conversation's model-written title, an automation's run and its dry run, a media call (images,
 * a transcription, speech); and the embeddings of a user's knowledge through their own connection
 * (indexing and search queries; recorded, cost 0).
 */
export type UsageKind =
  | 'chat.reply'
  | 'chat.title'
  | 'automation.run'
  | 'automation.test'
  | 'knowledge.index'
  | 'knowledge.search'
  | 'media.image'
  | 'media.transcription'
  | 'media.speech'
  | 'openai.chat'
  | 'openai.embeddings';

/** What a media call is priced by, and how many of them it used. */
export interface UsageUnits {
  unit: 'image' | 'second' | 'character';
  count: number;
}

/**
 * Writes what a charged action consumed, and its cost in millionths of a cent, to the usage ledger;
 * false when the ledger already has the action (its kind and resource): a write repeated after its
 * first try committed is not recorded twice.
 */
export async function recordUsage(
  db: Database,
  entry: {
    userId: string;
    kind: UsageKind;
    resourceId: string;
    model: ModelInfo;
    connectionId?: string | null;
    usage: ChatUsage;
    units?: UsageUnits;
    at: Date;
  },
  costMicroCents: number,
): Promise<boolean> {
  const recorded = await db
    .selectFrom('usage_records')
    .select('id')
    .where('kind', '=', entry.kind)
    .where('resource_id', '=', entry.resourceId)
    .executeTakeFirst();
  if (recorded) return false;
  await db
    .insertInto('usage_records')
    .values({
      id: uuidv7(entry.at.getTime()),
      user_id: entry.userId,
      kind: entry.kind,
      resource_id: entry.resourceId,
      model: entry.model.id,
      connection_id: entry.connectionId ?? null,
      input_tokens: entry.usage.inputTokens,
      output_tokens: entry.usage.outputTokens,
      cost_micro_cents: costMicroCents,
      unit: entry.units?.unit ?? null,
      units: entry.units?.count ?? null,
      created_at: entry.at,
    })
    .execute();
  return true;
}

/** The user's own charged calls since `since`, by model, from the usage ledger. */
export function spendByModel(db: Database, userId: string, since: Date) {
  return db
    .selectFrom('usage_records')
    .select((eb) => [
      'model',
      eb.fn.countAll<number>().as('calls'),
      sql<number>`coalesce(sum(input_tokens), 0)::int8`.as('input_tokens'),
      sql<number>`coalesce(sum(output_tokens), 0)::int8`.as('output_tokens'),
      sql<number>`coalesce(sum(cost_micro_cents), 0)::int8`.as('cost'),
    ])
    .where('user_id', '=', userId)
    .where('created_at', '>=', since)
    .groupBy('model')
    .orderBy('model')
    .execute();
}
