import { errors } from '../../http/errors';
import type { PageRequest } from '../../http/pagination';
import type { Database } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import { toPage } from '../../platform/pagination';
import type { Actor, AuditService } from '../audit/service';
import * as repo from './repository';

export const ADJUST_ACTION = 'administration.budget.adjust';

/** Users' budgets in cents, changed only through ledger entries. */
export class BudgetService {
  constructor(
    private readonly db: Database,
    private readonly audit: AuditService,
  ) {}

  async usage(userId: string, page: PageRequest) {
    const [budget, entries] = await Promise.all([
      repo.findBudget(this.db, userId),
      repo.listLedgerEntries(this.db, userId, page),
    ]);
    return { budget, entries: toPage(entries, page.limit) };
  }

  /**
   * Adds `amountCents` to the user's budget: the balance, its ledger entry and the audit event are
   * written in one transaction, with the budget row locked so concurrent adjustments add up.
   */
  async adjust(actor: Actor, change: { userId: string; amountCents: number; reason?: string }) {
    return this.db.transaction().execute(async (trx) => {
      const current = await repo.lockBudget(trx, change.userId);
      const balance = current.balance_cents + change.amountCents;
      // Taking away may not leave less than nothing; adding always applies (even to a balance usage overdrew).
      if (change.amountCents < 0 && balance < 0) {
        throw errors.conflict(`The balance is ${current.balance_cents} cents: it cannot go below zero.`);
      }
      const now = new Date();
      const budget = await repo.updateBudget(trx, change.userId, { balance_cents: balance, updated_at: now });
      const entry = await repo.insertLedgerEntry(trx, {
        id: uuidv7(now.getTime()),
        user_id: change.userId,
        amount_cents: change.amountCents,
        balance_after_cents: balance,
        kind: 'adjustment',
        actor_user_id: actor.userId,
        reason: change.reason ?? '',
        created_at: now,
      });
      await this.audit.record(
        actor,
        {
          action: ADJUST_ACTION,
          resourceType: 'budget',
          resourceId: change.userId,
          outcome: 'success',
          metadata: { amountCents: change.amountCents, balanceAfterCents: balance, reason: change.reason ?? null, entryId: entry.id },
        },
        trx,
      );
      return { budget, entry };
    });
  }
}
