import type { HandlerMap } from '../../http/handler';
import { presentBillingSettings, presentSubscription } from './presenter';
import type { BillingService } from './service';

export function billingHandlers(
  billing: BillingService,
): Pick<HandlerMap, 'getSubscription' | 'getBillingSettings' | 'updateBillingSettings'> {
  return {
    getSubscription: async ({ caller }) => ({ subscription: presentSubscription(await billing.subscription(caller.userId)) }),
    getBillingSettings: async ({ caller }) => ({ settings: presentBillingSettings(await billing.preferences(caller.userId)) }),
    updateBillingSettings: async ({ caller, body }) => ({
      settings: presentBillingSettings(await billing.updatePreferences(caller.userId, body.monthlySpendingLimitCents)),
    }),
  };
}
