import type { Schemas } from '../../platform/api-types';
import { millis } from '../../platform/db/timestamps';
import type { QuotaView } from './repository';
import type { QuotaPeriod, QuotaStanding } from './service';

const MICRO = 1_000_000;

export function presentQuota(row: QuotaView): Schemas['Quota'] {
  return {
    quotaId: row.id,
    groupId: row.group_id,
    model: row.model,
    period: row.period as QuotaPeriod,
    limitCents: row.limit_cents,
    thresholdPercent: row.threshold_percent,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}

export function presentStanding({ quota, period, spentMicro, reservedMicro, thresholdReached }: QuotaStanding): Schemas['OwnUsageQuota'] {
  return {
    quotaId: quota.id,
    groupId: quota.group_id,
    model: quota.model,
    period: quota.period as QuotaPeriod,
    periodStart: period.start.getTime(),
    periodEnd: period.end.getTime(),
    limitCents: quota.limit_cents,
    spentCents: spentMicro / MICRO,
    reservedCents: reservedMicro / MICRO,
    remainingCents: Math.max(0, quota.limit_cents * MICRO - spentMicro - reservedMicro) / MICRO,
    thresholdPercent: quota.threshold_percent,
    thresholdReached,
  };
}
