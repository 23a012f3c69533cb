import type { Transaction } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import type { Database, DB } from '../../platform/db';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { PageRequest } from '../../platform/pagination';
import type { Actor, AuditService } from '../audit/service';
import type { WebhookService } from '../webhooks/service';
import * as repo from './repository';

const RESOURCE_TYPE = 'quota';
/** Millionths of a cent in a cent: costs are counted in them, limits are set in cents. */
const MICRO = 1_000_000;

export type QuotaPeriod = 'day' | 'month';

/** The UTC calendar day or month around `now`. */
export function quotaPeriod(period: QuotaPeriod, now: Date): { start: Date; end: Date } {
  const [y, m, d] = [now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()];
  return period === 'day'
    ? { start: new Date(Date.UTC(y, m, d)), end: new Date(Date.UTC(y, m, d + 1)) }
    : { start: new Date(Date.UTC(y, m, 1)), end: new Date(Date.UTC(y, m + 1, 1)) };
}

/** What one call holds against the quotas that apply to it while it runs: the upper bound of its cost. */
export interface Hold {
  id: string;
  boundMicro: number;
}

/** The charged actions' view of quotas: reserve before a call, record (or release) after it. */
export interface QuotaLedger {
  reserve(userId: string, model: string, boundMicro: number): Promise<Hold | null>;
  record(
    trx: Transaction<DB>,
    charge: { userId: string; model: string; costMicro: number; holdId: string | null; at: Date },
  ): Promise<void>;
  release(holdId: string): Promise<void>;
}

/** A quota as it stands in its current period, for the user it applies to. */
export interface QuotaStanding {
  quota: repo.QuotaRow;
  period: { start: Date; end: Date };
  spentMicro: number;
  reservedMicro: number;
  thresholdReached: boolean;
}

export interface QuotaServiceDeps {
  db: Database;
  audit: AuditService;
  webhooks: Pick<WebhookService, 'emitEvent'>;
  /** How long a reservation counts: longer than any model call, so that only a crashed instance's expire. */
  reservationTtlMs: number;
  now?: () => Date;
}

/** Who a quota counts and what it limits, as an error names it. */
const named = (q: repo.QuotaRow) => ({ quotaId: q.id, groupId: q.group_id, model: q.model, limitCents: q.limit_cents });

function describe(q: repo.QuotaRow): string {
  const scope = q.group_id && q.model ? `the group's quota for ${q.model}` : q.group_id ? "the group's quota" : `the quota of ${q.model}`;
  return `${scope} (${q.limit_cents} cents a ${q.period})`;
}

/**
 * Spending quotas per group, per model and per model within a group, managed by admins (every
 * change audited in its transaction), and enforced on charged calls with reservations: a call
 * holds the upper bound of its cost against every quota that applies to it, under the quotas'
 * usage rows' locks, so that concurrent calls never take a quota past its limit.
 */
export class QuotaService implements QuotaLedger {
  private readonly db: Database;
  private readonly audit: AuditService;
  private readonly webhooks: Pick<WebhookService, 'emitEvent'>;
  private readonly ttlMs: number;
  private readonly now: () => Date;

  constructor({ db, audit, webhooks, reservationTtlMs, now = () => new Date() }: QuotaServiceDeps) {
    this.db = db;
    this.audit = audit;
    this.webhooks = webhooks;
    this.ttlMs = reservationTtlMs;
    this.now = now;
  }

  async get(quotaId: string): Promise<repo.QuotaView> {
    const quota = await repo.findQuota(this.db, quotaId);
    if (!quota) throw errors.notFound('Quota not found.');
    return quota;
  }

  list(page: PageRequest) {
    return repo.quotaList.page(this.db, {}, page);
  }

  async create(actor: Actor, input: RequestInput<'QuotaCreateRequest'>): Promise<repo.QuotaView> {
    if (input.groupId === undefined && input.model === undefined) {
      throw errors.invalidRequest('A quota limits a group, a model, or a model within a group: give groupId, model or both.', [
        { path: '/body/groupId', message: 'is required when model is not given' },
      ]);
    }
    const at = this.now();
    const id = uuidv7(at.getTime());
    const row = {
      id,
      groupId: input.groupId ?? null,
      model: input.model ?? null,
      period: input.period,
      limitCents: input.limitCents,
      thresholdPercent: input.thresholdPercent ?? null,
      createdBy: actor.userId,
      at,
    };
    return this.db.transaction().execute(async (trx) => {
      if (row.groupId !== null && !(await repo.groupExists(trx, row.groupId))) {
        throw errors.referenceNotFound('groupId', 'Group not found: groupId must name a group of the deployment.');
      }
      await repo.insertQuota(trx, row);
      const { id: _id, at: _at, createdBy: _by, ...metadata } = row;
      await this.audited(actor, 'administration.quota.create', id, metadata, trx);
      return (await repo.findQuota(trx, id)) as repo.QuotaView;
    });
  }

  async update(actor: Actor, input: RequestInput<'QuotaUpdateRequest'>): Promise<repo.QuotaView> {
    const patch = { period: input.period, limitCents: input.limitCents, thresholdPercent: input.thresholdPercent, at: this.now() };
    return this.db.transaction().execute(async (trx) => {
      if (!(await repo.updateQuota(trx, input.quotaId, patch))) throw errors.notFound('Quota not found.');
      await this.audited(
        actor,
        'administration.quota.update',
        input.quotaId,
        { period: input.period ?? null, limitCents: input.limitCents ?? null, thresholdPercent: input.thresholdPercent ?? null },
        trx,
      );
      return (await repo.findQuota(trx, input.quotaId)) as repo.QuotaView;
    });
  }

  async delete(actor: Actor, quotaId: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const quota = await repo.findQuota(trx, quotaId);
      if (!quota || !(await repo.deleteQuota(trx, quotaId))) throw errors.notFound('Quota not found.');
      const { group_id: groupId, model, period, limit_cents: limitCents } = quota;
      await this.audited(actor, 'administration.quota.delete', quotaId, { groupId, model, period, limitCents }, trx);
    });
  }

  /**
   * Holds `boundMicro` (the most the call can cost) against every quota that applies to a call of
   * `model` by `userId`, in one transaction with each quota's usage row locked: `402
   * quota_exceeded` when a quota's spending, what running calls hold and this bound would pass its
   * limit (or nothing is left of it). Null when no quota applies.
   */
  async reserve(userId: string, model: string, boundMicro: number): Promise<Hold | null> {
    const quotas = await repo.applicableQuotas(this.db, userId, model);
    if (quotas.length === 0) return null;
    const hold: Hold = { id: uuidv7(), boundMicro };
    await this.db.transaction().execute(async (trx) => {
      const now = this.now();
      for (const quota of quotas) {
        const period = quotaPeriod(quota.period as QuotaPeriod, now);
        const usage = await repo.lockUsage(trx, quota.id, period.start);
        await repo.deleteExpired(trx, quota.id, now);
        const held = usage.spent_micro_cents + (await repo.reservedMicro(trx, quota.id, period.start, now));
        const limit = quota.limit_cents * MICRO;
        if (held >= limit || held + boundMicro > limit) {
          const left = Math.max(0, limit - held) / MICRO;
          throw errors.quotaExceeded(
            `The call does not fit in ${describe(quota)}: ${left} cents are left this ${quota.period} and the call may cost up to ${boundMicro / MICRO}.`,
            { ...named(quota), periodEnd: period.end.getTime() },
          );
        }
        await repo.insertReservation(trx, {
          holdId: hold.id,
          quotaId: quota.id,
          periodStart: period.start,
          amount: boundMicro,
          expiresAt: new Date(now.getTime() + this.ttlMs),
          at: now,
        });
      }
    });
    return hold;
  }

  /**
   * Counts a charged call's cost toward every quota that applies to it, in the charge's
   * transaction, and drops the call's reservations. A quota whose threshold the call reaches
   * records it in its usage row and emits `usage.threshold_reached` once for its period: to the
   * caller, and to the admin who created the quota.
   */
  async record(
    trx: Transaction<DB>,
    charge: { userId: string; model: string; costMicro: number; holdId: string | null; at: Date },
  ): Promise<void> {
    if (charge.holdId) await repo.deleteHold(trx, charge.holdId);
    if (charge.costMicro === 0) return;
    for (const quota of await repo.applicableQuotas(trx, charge.userId, charge.model)) {
      const period = quotaPeriod(quota.period as QuotaPeriod, charge.at);
      const usage = await repo.lockUsage(trx, quota.id, period.start);
      const spent = usage.spent_micro_cents + charge.costMicro;
      const reached =
        quota.threshold_percent !== null &&
        usage.threshold_reached_at === null &&
        spent * 100 >= quota.limit_cents * MICRO * quota.threshold_percent;
      await repo.setUsage(trx, quota.id, period.start, { spent, thresholdReachedAt: reached ? charge.at : undefined });
      if (!reached) continue;
      const data = {
        quotaId: quota.id,
        groupId: quota.group_id,
        model: quota.model,
        period: quota.period as QuotaPeriod,
        periodStart: period.start.getTime(),
        periodEnd: period.end.getTime(),
        limitCents: quota.limit_cents,
        spentCents: spent / MICRO,
        thresholdPercent: quota.threshold_percent as number,
        userId: charge.userId,
      };
      for (const recipient of new Set([charge.userId, quota.created_by])) {
        await this.webhooks.emitEvent(trx, 'usage.threshold_reached', recipient, data);
      }
    }
  }

  /** Drops a call's reservations (it failed, or was not charged). */
  async release(holdId: string): Promise<void> {
    await repo.deleteHold(this.db, holdId);
  }

  /** Every quota that can apply to `userId` (their groups' and the models'), as it stands in its current period. */
  async standings(userId: string): Promise<QuotaStanding[]> {
    const now = this.now();
    const quotas = await repo.applicableQuotas(this.db, userId, null);
    const periods = quotas.map((q) => ({ quota: q, period: quotaPeriod(q.period as QuotaPeriod, now) }));
    const rows = await repo.usageRows(
      this.db,
      periods.map((p) => ({ quotaId: p.quota.id, periodStart: p.period.start })),
    );
    return Promise.all(
      periods.map(async ({ quota, period }) => {
        const usage = rows.find((r) => r.quota_id === quota.id && r.period_start.getTime() === period.start.getTime());
        return {
          quota,
          period,
          spentMicro: usage?.spent_micro_cents ?? 0,
          reservedMicro: await repo.reservedMicro(this.db, quota.id, period.start, now),
          thresholdReached: Boolean(usage?.threshold_reached_at),
        };
      }),
    );
  }

  private audited(actor: Actor, action: string, quotaId: string, metadata: Record<string, unknown>, trx: Database) {
    return this.audit.record(actor, { action, resourceType: RESOURCE_TYPE, resourceId: quotaId, outcome: 'success', metadata }, trx);
  }
}
