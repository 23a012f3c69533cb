import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Selectable, Updateable } from 'kysely';
import type { Budgets } from '../../../generated/db';
import type { Database } from '../../platform/db';
import type { Actor, AuditService } from '../audit/service';
import * as repo from './repository';

export const ADJUST_ACTION = 'administration.budget.adjust';

/**
 * The largest amount one posting may add to (or take from) a balance, in cents: the bound of an
 * admin adjustment (`BudgetAdjustRequest.amountCents` in the document, which a test holds equal)
 * and of a paid top-up.
 */
export const MAX_POSTING_CENTS = 100_000_000;

/** A user's budget as it stands, or undefined before its first change (billing reads the period's spending from it). */
export function findBudget(db: Database, userId: string) {
  return repo.findBudget(db, userId);
}

/** The user's budget, created at zero if missing, locked until the caller's transaction ends. */
export function lockBudget(trx: Database, userId: string) {
  return repo.lockBudget(trx, userId);
}

/**
 * Charges usage to a budget locked in the caller's transaction: stores the period's fields and, when
 * whole cents are owed, takes them from the balance with a `usage` ledger entry.
 */
export async function chargeUsage(
  trx: Database,
  budget: Selectable<Budgets>,
  charge: { cents: number; period: Updateable<Budgets>; reason: string; reference: string; at: Date },
): Promise<void> {
  if (charge.cents === 0) {
    await repo.updateBudget(trx, budget.user_id, { ...charge.period, updated_at: charge.at });
    return;
  }
  const posting = {
    amountCents: -charge.cents,
    kind: 'usage' as const,
    actorUserId: budget.user_id,
    reason: charge.reason,
    reference: charge.reference,
    at: charge.at,
  };
  await repo.post(trx, budget, posting, charge.period);
}

/** Adds a paid top-up to the user's balance once per reference; false when that reference was applied already. */
export async function topUp(
  trx: Database,
  userId: string,
  top: { amountCents: number; reason: string; reference: string; at: Date },
): Promise<boolean> {
  if (await repo.findLedgerEntryByReference(trx, top.reference)) return false;
  const budget = await repo.lockBudget(trx, userId);
  await repo.post(trx, budget, {
    amountCents: top.amountCents,
    kind: 'top_up',
    actorUserId: userId,
    reason: top.reason,
    reference: top.reference,
    at: top.at,
  });
  return true;
}

/** Users' budgets in cents, changed only through ledger entries. */
export class BudgetService {
  constructor(
    private readonly db: Database,
    private readonly audit: AuditService,
  ) {}

  async usage(userId: string, page: PageRequest) {
    const [budget, entries] = await Promise.all([repo.findBudget(this.db, userId), repo.ledgerEntryList.page(this.db, { userId }, page)]);
    return { budget, entries };
  }

  /**
   * Adds `amountCents` to the user's budget: the balance, its ledger entry and the audit event are
   * written in one transaction, with the budget row locked so concurrent adjustments add up.
   */
  async adjust(actor: Actor, change: { userId: string; amountCents: number; reason?: string }) {
    return this.db.transaction().execute(async (trx) => {
      const current = await repo.lockBudget(trx, change.userId);
      // Taking away may not leave less than nothing; adding always applies (even to a balance usage overdrew).
      if (change.amountCents < 0 && current.balance_cents + change.amountCents < 0) {
        throw errors.conflict(`The balance is ${current.balance_cents} cents: it cannot go below zero.`);
      }
      const { budget, entry } = await repo.post(trx, current, {
        amountCents: change.amountCents,
        kind: 'adjustment',
        actorUserId: actor.userId,
        reason: change.reason ?? '',
        at: new Date(),
      });
      await this.audit.record(
        actor,
        {
          action: ADJUST_ACTION,
          resourceType: 'budget',
          resourceId: change.userId,
          outcome: 'success',
          metadata: {
            amountCents: change.amountCents,
            balanceAfterCents: budget.balance_cents,
            reason: change.reason ?? null,
            entryId: entry.id,
          },
        },
        trx,
      );
      return { budget, entry };
    });
  }
}
