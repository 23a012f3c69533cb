import type { components } from '../../../generated/api';
import type { findSettings } from './repository';
import { MICRO, type Spending, type Standing } from './service';

type Schemas = components['schemas'];

/** Millionths of a cent as whole cents, rounded down (null stays unlimited). */
const cents = (micro: number | null): number | null => (micro === null ? null : Math.floor(micro / MICRO));

export function presentSubscription(state: {
  standing: Standing;
  spending: Spending;
  storageUsedBytes: number;
  automationCount: number;
}): Schemas['Subscription'] {
  const { standing, spending } = state;
  const sub = standing.subscription;
  return {
    plan: standing.plan,
    status: (sub?.status ?? 'none') as Schemas['Subscription']['status'],
    provider: standing.provider,
    subscriptionId: sub?.id ?? null,
    currentPeriodStart: sub?.current_period_start?.getTime() ?? null,
    currentPeriodEnd: sub?.current_period_end?.getTime() ?? null,
    cancelAtPeriodEnd: sub?.cancel_at_period_end ?? false,
    latestInvoice:
      sub?.latest_invoice_status && sub.invoice_event_created_at
        ? {
            status: sub.latest_invoice_status as NonNullable<Schemas['LatestInvoice']>['status'],
            amountCents: sub.latest_invoice_amount_cents ?? 0,
            at: sub.invoice_event_created_at.getTime(),
          }
        : null,
    entitlements: standing.entitlements,
    usage: {
      periodStart: standing.period.start.getTime(),
      periodEnd: standing.period.end.getTime(),
      spentCents: cents(spending.spentMicro) as number,
      allowanceRemainingCents: cents(spending.allowanceRemainingMicro),
      balanceCents: spending.balanceCents,
      spendingLimitCents: spending.limitCents,
      availableCents: cents(spending.availableMicro),
      storageUsedBytes: state.storageUsedBytes,
      automationCount: state.automationCount,
    },
    updatedAt: sub?.updated_at.getTime() ?? null,
  };
}

export function presentBillingSettings(state: {
  provider: Schemas['BillingProvider'];
  currency: string;
  settings: Awaited<ReturnType<typeof findSettings>>;
}): Schemas['BillingSettings'] {
  return {
    provider: state.provider,
    currency: state.currency,
    monthlySpendingLimitCents: state.settings?.monthly_spending_limit_cents ?? null,
    updatedAt: state.settings?.updated_at.getTime() ?? null,
  };
}
