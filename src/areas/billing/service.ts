import type { Selectable, Transaction } from 'kysely';
import type { Budgets } from '../../../generated/db';
import type { Schemas } from '../../platform/api-types';
import { errors } from '../../platform/errors';
import type { ChatUsage, ModelInfo } from '../../platform/ai/models';
import type { Database, DB } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import { costMicroCents } from '../../platform/usage';
import * as budgets from '../budgets/service';
import type { CapabilityService } from '../capabilities/service';
import type { Hold, QuotaLedger } from '../quotas/service';
import * as repo from './repository';

/** Millionths of a cent in a cent: usage is priced in them, budgets are kept in cents. */
export const MICRO = 1_000_000;

/** What a plan allows; null is unlimited. */
export interface Entitlements {
  monthlyBudgetCents: number | null;
  storageBytes: number | null;
  automations: number | null;
}

/** A paid plan: the provider's prices that buy it and what it entitles to. */
export interface Plan {
  id: string;
  priceIds: string[];
  entitlements: Entitlements;
}

/** The charged actions: a chat reply, an automation's run and its dry run. */
export type UsageKind = repo.UsageKind;

export interface BillingSettings {
  currency: string;
  defaultEntitlements: Entitlements;
  plans: Plan[];
}

export interface Period {
  start: Date;
  end: Date;
}

/** Which plan applies to a user now, with what entitlements, over which spending period. */
export interface Standing {
  plan: string;
  provider: Schemas['BillingProvider'];
  subscription: repo.SubscriptionRow | null;
  entitlements: Entitlements;
  period: Period;
}

/** Where a user stands in the period, in millionths of a cent (null: unlimited). */
export interface Spending {
  spentMicro: number;
  allowanceRemainingMicro: number | null;
  balanceCents: number;
  limitCents: number | null;
  availableMicro: number | null;
}

/** A user's plan and what is left to spend in the period, in whole cents rounded down (null: unlimited). */
export interface BillingSummary {
  plan: string;
  status: string;
  provider: Standing['provider'];
  periodEnd: Date;
  entitlements: Entitlements;
  spentCents: number;
  availableCents: number | null;
}

/** What is checked before an action consumes an entitlement, inside the action's transaction. */
export interface EntitlementGuard {
  requireStorage(trx: Transaction<DB>, userId: string, addBytes: number): Promise<void>;
  requireAutomationSlot(trx: Transaction<DB>, userId: string): Promise<void>;
}

export type { Hold } from '../quotas/service';

/**
 * The charged actions' view of billing: check the budget and reserve the call's upper bound
 * against the quotas before, charge after (or release the reservation when the call fails).
 */
export interface BudgetGate {
  requireBudget(userId: string): Promise<void>;
  reserve(userId: string, estimate: CallEstimate): Promise<Hold | null>;
  release(hold: Hold | null): Promise<void>;
  charge(trx: Transaction<DB>, entry: ChargeEntry): Promise<number>;
}

/** The most a call may use: its tokens (an estimate of the prompt, the most output it is allowed) and its media units. */
export interface CallEstimate {
  model: ModelInfo;
  usage: ChatUsage;
  units?: { count: number; microCentsPerUnit: number };
}

export interface ChargeEntry {
  userId: string;
  kind: UsageKind;
  resourceId: string;
  model: ModelInfo;
  /** The user's own connection the call went through: recorded with it, never charged. */
  connectionId?: string | null;
  usage: ChatUsage;
  /** A media call's units and their price (millionths of a cent each), charged beside the tokens. */
  units?: repo.UsageUnits & { microCentsPerUnit: number };
  at: Date;
  /**
   * The call's reservation: it is replaced by the charge, which never exceeds the reserved bound
   * (a call that used more than its bound is charged the bound).
   */
  hold?: Hold | null;
}

/** The calendar month (UTC) around `now`: the period of everyone without a provider subscription. */
export function calendarMonth(now: Date): Period {
  return {
    start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)),
    end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)),
  };
}

/**
 * The subscription's current period. When the provider's renewal has not arrived yet, the period
 * is carried forward by whole periods so that spending starts again on time.
 */
export function subscriptionPeriod(start: Date, end: Date, now: Date): Period {
  const length = end.getTime() - start.getTime();
  if (length <= 0 || now < end) return { start, end };
  const skipped = Math.floor((now.getTime() - start.getTime()) / length);
  return { start: new Date(start.getTime() + skipped * length), end: new Date(start.getTime() + (skipped + 1) * length) };
}

/**
 * The spending arithmetic: usage first uses the plan's allowance for the period, then the prepaid
 * balance (less the fraction of a cent still owed); the user's own limit caps the period's total.
 */
export function spendingOf(
  budget: Selectable<Budgets> | undefined,
  entitlements: Entitlements,
  limitCents: number | null,
  period: Period,
): Spending {
  const spentMicro = budget && budget.period_start?.getTime() === period.start.getTime() ? budget.period_spent_micro_cents : 0;
  const balanceCents = budget?.balance_cents ?? 0;
  const allowanceRemainingMicro =
    entitlements.monthlyBudgetCents === null ? null : Math.max(0, entitlements.monthlyBudgetCents * MICRO - spentMicro);
  let availableMicro =
    allowanceRemainingMicro === null ? null : allowanceRemainingMicro + balanceCents * MICRO - (budget?.carry_micro_cents ?? 0);
  if (limitCents !== null) availableMicro = Math.min(availableMicro ?? Number.POSITIVE_INFINITY, limitCents * MICRO - spentMicro);
  return { spentMicro, allowanceRemainingMicro, balanceCents, limitCents, availableMicro };
}

/** What a BillingService is built from. */
export interface BillingServiceDeps {
  db: Database;
  capabilities: CapabilityService;
  settings: BillingSettings;
  /** The spending quotas per group and model, which charged calls reserve against and count toward. */
  quotas?: QuotaLedger;
  now?: () => Date;
}

/**
 * Billing state as the rest of the service sees it: the plan and entitlements that apply to a
 * user (the self-hosted ones while billing is off), budgets checked before charged actions and
 * charged after them, and the entitlement checks of uploads and automations.
 */
export class BillingService implements BudgetGate, EntitlementGuard {
  private readonly db: Database;
  private readonly capabilities: CapabilityService;
  private readonly settings: BillingSettings;
  private readonly quotas: QuotaLedger | null;
  private readonly now: () => Date;

  constructor({ db, capabilities, settings, quotas, now = () => new Date() }: BillingServiceDeps) {
    this.db = db;
    this.capabilities = capabilities;
    this.settings = settings;
    this.quotas = quotas ?? null;
    this.now = now;
  }

  async standing(userId: string, db: Database = this.db): Promise<Standing> {
    const now = this.now();
    const { billing, billingProvider } = await this.capabilities.current(db);
    const unpaid = (plan: string, provider: Standing['provider'], subscription: repo.SubscriptionRow | null): Standing => ({
      plan,
      provider,
      subscription,
      entitlements: this.settings.defaultEntitlements,
      period: calendarMonth(now),
    });
    if (!billing || billingProvider === 'none') return unpaid('self_hosted', 'none', null);
    const subscription = (await repo.findUserSubscription(db, userId)) ?? null;
    const plan = subscription && this.entitledPlan(subscription);
    if (!subscription || !plan) return unpaid('free', billingProvider, subscription);
    const period =
      subscription.current_period_start && subscription.current_period_end
        ? subscriptionPeriod(subscription.current_period_start, subscription.current_period_end, now)
        : calendarMonth(now);
    return { plan: plan.id, provider: billingProvider, subscription, entitlements: plan.entitlements, period };
  }

  /** The standing and where the user stands in its period. */
  async spending(userId: string): Promise<{ standing: Standing; spending: Spending }> {
    const standing = await this.standing(userId);
    const [budget, settings] = await Promise.all([budgets.findBudget(this.db, userId), repo.findSettings(this.db, userId)]);
    return {
      standing,
      spending: spendingOf(budget, standing.entitlements, settings?.monthly_spending_limit_cents ?? null, standing.period),
    };
  }

  /** The standing, the spending and the entitlements' use, as `GET /subscription` shows them. */
  async subscription(userId: string) {
    const [state, storageUsedBytes, automationCount] = await Promise.all([
      this.spending(userId),
      repo.storageUsed(this.db, userId),
      repo.automationCount(this.db, userId),
    ]);
    return { ...state, storageUsedBytes, automationCount };
  }

  /** The plan and what is left to spend, for a client's shell (without the entitlements' use). */
  async summary(userId: string): Promise<BillingSummary> {
    const { standing, spending } = await this.spending(userId);
    return {
      plan: standing.plan,
      status: standing.subscription?.status ?? 'none',
      provider: standing.provider,
      periodEnd: standing.period.end,
      entitlements: standing.entitlements,
      spentCents: Math.floor(spending.spentMicro / MICRO),
      availableCents: spending.availableMicro === null ? null : Math.floor(spending.availableMicro / MICRO),
    };
  }

  /** The user's own charged calls in the period starting at `since`, by model, from the usage ledger. */
  spendByModel(userId: string, since: Date) {
    return repo.spendByModel(this.db, userId, since);
  }

  async preferences(userId: string) {
    // The capabilities already say `none` while billing is off.
    const [settings, { billingProvider }] = await Promise.all([repo.findSettings(this.db, userId), this.capabilities.current()]);
    return { provider: billingProvider, currency: this.settings.currency, settings };
  }

  async updatePreferences(userId: string, monthlySpendingLimitCents: number | null) {
    await repo.upsertSettings(this.db, userId, monthlySpendingLimitCents, this.now());
    return this.preferences(userId);
  }

  /** `402 budget_exhausted` when nothing is left to spend in the period. */
  async requireBudget(userId: string): Promise<void> {
    const { standing, spending } = await this.spending(userId);
    if (spending.availableMicro !== null && spending.availableMicro <= 0) throw errors.budgetExhausted(standing.period.end);
  }

  /**
   * Reserves the most the call may cost against every quota that applies to it (`402
   * quota_exceeded` when one has no room); null when none applies. The model is not to be called
   * before this answers.
   */
  async reserve(userId: string, estimate: CallEstimate): Promise<Hold | null> {
    if (!this.quotas) return null;
    const bound =
      costMicroCents(estimate.model, estimate.usage) + (estimate.units ? estimate.units.count * estimate.units.microCentsPerUnit : 0);
    return this.quotas.reserve(userId, estimate.model.id, bound);
  }

  /** Drops a reservation whose call failed or was not charged (nothing when already charged). */
  async release(hold: Hold | null): Promise<void> {
    if (hold && this.quotas) await this.quotas.release(hold.id);
  }

  /**
   * Records what a charged action consumed and charges it, in the transaction that records the
   * action's outcome: the period's allowance first, then the balance in whole cents (the fraction
   * carried to the next charge), each cent taken from the balance written to the ledger.
   * Returns the cost in millionths of a cent; an action the ledger has already (its kind and
   * resource) is neither recorded nor charged again, and costs 0.
   */
  async charge(trx: Transaction<DB>, entry: ChargeEntry): Promise<number> {
    const used = entry.connectionId
      ? 0
      : costMicroCents(entry.model, entry.usage) + (entry.units ? entry.units.count * entry.units.microCentsPerUnit : 0);
    const cost = entry.hold ? Math.min(used, entry.hold.boundMicro) : used;
    const holdId = entry.hold?.id ?? null;
    // Charged already (a repeated write): nothing more to record or charge.
    if (!(await repo.recordUsage(trx, entry, cost))) {
      if (holdId && this.quotas)
        await this.quotas.record(trx, { userId: entry.userId, model: entry.model.id, costMicro: 0, holdId, at: entry.at });
      return 0;
    }
    if (this.quotas && (cost > 0 || holdId)) {
      await this.quotas.record(trx, { userId: entry.userId, model: entry.model.id, costMicro: cost, holdId, at: entry.at });
    }
    if (cost === 0) return cost;
    const standing = await this.standing(entry.userId, trx);
    const budget = await budgets.lockBudget(trx, entry.userId);
    const { spentMicro, allowanceRemainingMicro } = spendingOf(budget, standing.entitlements, null, standing.period);
    const owed = allowanceRemainingMicro === null ? 0 : cost - Math.min(cost, allowanceRemainingMicro);
    const carry = budget.carry_micro_cents + owed;
    const cents = Math.floor(carry / MICRO);
    const period = {
      period_start: standing.period.start,
      period_spent_micro_cents: spentMicro + cost,
      carry_micro_cents: carry - cents * MICRO,
    };
    await budgets.chargeUsage(trx, budget, {
      cents,
      period,
      reason: `${entry.kind} ${entry.resourceId}`,
      reference: `usage:${entry.kind}:${entry.resourceId}`,
      at: entry.at,
    });
    return cost;
  }

  /** `402 quota_exceeded` when `addBytes` more (files or outputs) would pass the plan's storage; serialized per user. */
  async requireStorage(trx: Transaction<DB>, userId: string, addBytes: number): Promise<void> {
    const { entitlements } = await this.standing(userId, trx);
    if (entitlements.storageBytes === null) return;
    await lockForTransaction(trx, `entitlements:${userId}`);
    const used = await repo.storageUsed(trx, userId);
    if (used + addBytes > entitlements.storageBytes) {
      throw errors.quotaExceeded(`The plan allows ${entitlements.storageBytes} bytes of files and outputs; ${used} are used.`, {
        entitlement: 'storageBytes',
        limit: entitlements.storageBytes,
        used,
      });
    }
  }

  /** `402 quota_exceeded` when the user has all the automations the plan allows; serialized per user. */
  async requireAutomationSlot(trx: Transaction<DB>, userId: string): Promise<void> {
    const { entitlements } = await this.standing(userId, trx);
    if (entitlements.automations === null) return;
    await lockForTransaction(trx, `entitlements:${userId}`);
    const used = await repo.automationCount(trx, userId);
    if (used >= entitlements.automations) {
      throw errors.quotaExceeded(`The plan allows ${entitlements.automations} automations.`, {
        entitlement: 'automations',
        limit: entitlements.automations,
        used,
      });
    }
  }

  /** The configured plan a subscription entitles its user to, if its status entitles at all. */
  private entitledPlan(subscription: repo.SubscriptionRow): Plan | null {
    if (!(repo.ENTITLED_STATUSES as readonly string[]).includes(subscription.status)) return null;
    return this.settings.plans.find((plan) => plan.id === subscription.plan) ?? null;
  }
}
