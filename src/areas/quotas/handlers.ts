import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentQuota } from './presenter';
import type { QuotaService } from './service';
import type { UsageService } from './usage';

export function quotaHandlers(
  quotas: QuotaService,
  usage: UsageService,
): Pick<HandlerMap, 'getAdminQuotas' | 'createAdminQuota' | 'updateAdminQuota' | 'deleteAdminQuota' | 'getUsage'> {
  return {
    getAdminQuotas: async ({ query }) => {
      if (query.quotaId !== undefined) return { quota: presentQuota(await quotas.get(query.quotaId)) };
      const page = await quotas.list(readPage(query));
      return { quotas: page.items.map(presentQuota), nextCursor: page.nextCursor };
    },
    createAdminQuota: async ({ actor, body }) => ({ quota: presentQuota(await quotas.create(actor, body)) }),
    updateAdminQuota: async ({ actor, body }) => ({ quota: presentQuota(await quotas.update(actor, body)) }),
    deleteAdminQuota: async ({ actor, query, body }) => {
      const quotaId = idFromQueryOrBody('quotaId', query, body);
      await quotas.delete(actor, quotaId);
      return { quotaId, deleted: true };
    },
    getUsage: async ({ caller }) => ({ usage: await usage.of(caller.userId) }),
  };
}
