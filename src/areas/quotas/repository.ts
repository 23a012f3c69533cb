import { type Selectable, sql } from 'kysely';
import type { Quotas } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { groupsOf } from '../../platform/db/access';
import { listQuery } from '../../platform/db/list-query';
import { epochMs } from '../../platform/db/timestamps';
import { uuidv7 } from '../../platform/ids';

export type QuotaRow = Selectable<Quotas>;

const QUOTA_FIELDS = ['id', 'group_id', 'model', 'period', 'limit_cents', 'threshold_percent', 'created_by'] as const;

/** The deployment's quotas, newest first; read a page at a time. */
export const quotaList = listQuery({
  id: 'id',
  rows: (db) => db.selectFrom('quotas').select([...QUOTA_FIELDS, epochMs('created_at'), epochMs('updated_at')]),
});
export type QuotaView = Awaited<ReturnType<typeof quotaList.page>>['items'][number];

export function findQuota(db: Database, id: string): Promise<QuotaView | undefined> {
  return db
    .selectFrom('quotas')
    .select([...QUOTA_FIELDS, epochMs('created_at'), epochMs('updated_at')])
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function groupExists(db: Database, groupId: string): Promise<boolean> {
  return (await db.selectFrom('groups').select('id').where('id', '=', groupId).executeTakeFirst()) !== undefined;
}

export async function insertQuota(
  db: Database,
  row: {
    id: string;
    groupId: string | null;
    model: string | null;
    period: string;
    limitCents: number;
    thresholdPercent: number | null;
    createdBy: string;
    at: Date;
  },
): Promise<void> {
  await db
    .insertInto('quotas')
    .values({
      id: row.id,
      group_id: row.groupId,
      model: row.model,
      period: row.period,
      limit_cents: row.limitCents,
      threshold_percent: row.thresholdPercent,
      created_by: row.createdBy,
      created_at: row.at,
      updated_at: row.at,
    })
    .execute();
}

/** Whether the quota existed (now changed). */
export async function updateQuota(
  db: Database,
  id: string,
  patch: { period?: string; limitCents?: number; thresholdPercent?: number | null; at: Date },
): Promise<boolean> {
  const result = await db
    .updateTable('quotas')
    .set({ period: patch.period, limit_cents: patch.limitCents, threshold_percent: patch.thresholdPercent, updated_at: patch.at })
    .where('id', '=', id)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Whether the quota existed (now deleted, with its usage and reservations). */
export async function deleteQuota(db: Database, id: string): Promise<boolean> {
  const result = await db.deleteFrom('quotas').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * The quotas a call by `userId` counts toward: their groups' (for every model, or for `model`) and
 * the deployment's quotas of `model`; with `model` null, every quota that can apply to the user.
 * Ordered by id: the order their usage rows are locked in, so that concurrent calls never deadlock.
 */
export function applicableQuotas(db: Database, userId: string, model: string | null): Promise<QuotaRow[]> {
  return db
    .selectFrom('quotas')
    .selectAll()
    .where((eb) => eb.or([eb('group_id', 'is', null), sql<boolean>`quotas.group_id in (${groupsOf(userId)})`]))
    .$if(model !== null, (qb) => qb.where((eb) => eb.or([eb('model', 'is', null), eb('model', '=', model as string)])))
    .orderBy('id')
    .execute();
}

/** A quota's usage row for the period, created at zero if missing, locked until the transaction ends. */
export async function lockUsage(db: Database, quotaId: string, periodStart: Date) {
  await db
    .insertInto('quota_usage')
    .values({ quota_id: quotaId, period_start: periodStart })
    .onConflict((oc) => oc.columns(['quota_id', 'period_start']).doNothing())
    .execute();
  return db
    .selectFrom('quota_usage')
    .selectAll()
    .where('quota_id', '=', quotaId)
    .where('period_start', '=', periodStart)
    .forUpdate()
    .executeTakeFirstOrThrow();
}

export async function setUsage(db: Database, quotaId: string, periodStart: Date, patch: { spent: number; thresholdReachedAt?: Date }) {
  await db
    .updateTable('quota_usage')
    .set({ spent_micro_cents: patch.spent, ...(patch.thresholdReachedAt ? { threshold_reached_at: patch.thresholdReachedAt } : {}) })
    .where('quota_id', '=', quotaId)
    .where('period_start', '=', periodStart)
    .execute();
}

/** What unexpired reservations hold against the quota's period, in millionths of a cent. */
export async function reservedMicro(db: Database, quotaId: string, periodStart: Date, now: Date): Promise<number> {
  const row = await db
    .selectFrom('quota_reservations')
    .select(sql<number>`coalesce(sum(amount_micro_cents), 0)::int8`.as('held'))
    .where('quota_id', '=', quotaId)
    .where('period_start', '=', periodStart)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return Number(row?.held ?? 0);
}

/** Forgets the quota's reservations that expired (left by an instance that stopped mid-call). */
export async function deleteExpired(db: Database, quotaId: string, now: Date): Promise<void> {
  await db.deleteFrom('quota_reservations').where('quota_id', '=', quotaId).where('expires_at', '<=', now).execute();
}

export async function insertReservation(
  db: Database,
  row: { holdId: string; quotaId: string; periodStart: Date; amount: number; expiresAt: Date; at: Date },
): Promise<void> {
  await db
    .insertInto('quota_reservations')
    .values({
      id: uuidv7(row.at.getTime()),
      hold_id: row.holdId,
      quota_id: row.quotaId,
      period_start: row.periodStart,
      amount_micro_cents: row.amount,
      expires_at: row.expiresAt,
    })
    .execute();
}

export async function deleteHold(db: Database, holdId: string): Promise<void> {
  await db.deleteFrom('quota_reservations').where('hold_id', '=', holdId).execute();
}

/** The usage rows of these quotas' periods (each quota with its own period start), unlocked. */
export async function usageRows(db: Database, periods: Array<{ quotaId: string; periodStart: Date }>) {
  if (periods.length === 0) return [];
  return db
    .selectFrom('quota_usage')
    .selectAll()
    .where((eb) => eb.or(periods.map((p) => eb.and([eb('quota_id', '=', p.quotaId), eb('period_start', '=', p.periodStart)]))))
    .execute();
}
