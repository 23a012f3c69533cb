import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentDelivery, presentSubscription } from './presenter';
import type { WebhookService } from './service';

export function webhookHandlers(
  webhooks: WebhookService,
): Pick<
  HandlerMap,
  | 'getWebhooks'
  | 'createWebhook'
  | 'updateWebhook'
  | 'deleteWebhook'
  | 'rotateWebhookSecret'
  | 'testWebhook'
  | 'getWebhookDeliveries'
  | 'redeliverWebhook'
> {
  return {
    getWebhooks: async ({ caller, query }) => {
      if (query.subscriptionId !== undefined) {
        return { subscription: presentSubscription(await webhooks.get(caller.userId, query.subscriptionId)) };
      }
      const page = await webhooks.list(caller.userId, readPage(query));
      return { subscriptions: page.items.map(presentSubscription), nextCursor: page.nextCursor };
    },
    createWebhook: async ({ caller, body }) => {
      const { subscription, secret } = await webhooks.create(caller.userId, body);
      return { subscription: presentSubscription(subscription), secret };
    },
    updateWebhook: async ({ caller, body }) => ({ subscription: presentSubscription(await webhooks.update(caller.userId, body)) }),
    deleteWebhook: async ({ caller, query, body }) => {
      const subscriptionId = idFromQueryOrBody('subscriptionId', query, body);
      await webhooks.delete(caller.userId, subscriptionId);
      return { subscriptionId, deleted: true };
    },
    rotateWebhookSecret: async ({ caller, body }) => {
      const { subscription, secret } = await webhooks.rotateSecret(caller.userId, body.subscriptionId, body.graceSeconds);
      return { subscription: presentSubscription(subscription), secret };
    },
    testWebhook: async ({ caller, body }) => ({ delivery: presentDelivery(await webhooks.sendTest(caller.userId, body.subscriptionId)) }),
    getWebhookDeliveries: async ({ caller, query }) => {
      if (query.deliveryId !== undefined) return { delivery: presentDelivery(await webhooks.getDelivery(caller.userId, query.deliveryId)) };
      const filter = { subscriptionId: query.subscriptionId, status: query.status };
      const page = await webhooks.listDeliveries(caller.userId, filter, readPage(query));
      return { deliveries: page.items.map(presentDelivery), nextCursor: page.nextCursor };
    },
    redeliverWebhook: async ({ caller, body }) => ({ delivery: presentDelivery(await webhooks.redeliver(caller.userId, body.deliveryId)) }),
  };
}
