import type { HandlerMap } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentBudget, presentLedgerEntry } from './presenter';
import type { BudgetService } from './service';

export function budgetHandlers(budgets: BudgetService): Pick<HandlerMap, 'getAdminUsage' | 'adjustAdminBudget'> {
  return {
    getAdminUsage: async ({ query }) => {
      const { budget, entries } = await budgets.usage(query.userId, readPage(query));
      return {
        budget: presentBudget(query.userId, budget),
        entries: entries.items.map(presentLedgerEntry),
        nextCursor: entries.nextCursor,
      };
    },
    adjustAdminBudget: async ({ actor, body }) => {
      const { budget, entry } = await budgets.adjust(actor, body);
      return { budget: presentBudget(body.userId, budget), entry: presentLedgerEntry(entry) };
    },
  };
}
