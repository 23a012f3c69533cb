import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { presentIntegration } from './presenter';
import type { IntegrationAuthorizationService } from './authorization';
import type { IntegrationConnectionService } from './connections';
import type { IntegrationService } from './service';

export interface IntegrationAreaServices {
  integrations: IntegrationService;
  authorization: Pick<IntegrationAuthorizationService, 'connect'>;
  connections: Pick<IntegrationConnectionService, 'disconnect'>;
}

export function integrationHandlers({
  integrations,
  authorization,
  connections,
}: IntegrationAreaServices): Pick<HandlerMap, 'getIntegrations' | 'connectIntegration' | 'disconnectIntegration'> {
  const present = (view: Parameters<typeof presentIntegration>[0]) => presentIntegration(view, (row) => integrations.isExpired(row));
  return {
    getIntegrations: async ({ caller, query }) => {
      if (query.integrationId !== undefined)
        return { integration: present(await integrations.integration(caller.userId, query.integrationId)) };
      return { integrations: (await integrations.catalog(caller.userId)).map(present) };
    },
    connectIntegration: async ({ actor, body }) => {
      const started = await authorization.connect(actor, body.integrationId);
      return {
        authorization: {
          integrationId: started.integrationId,
          authorizationUrl: started.authorizationUrl,
          expiresAt: started.expiresAt.getTime(),
        },
      };
    },
    disconnectIntegration: async ({ actor, query, body }) => {
      const integrationId = idFromQueryOrBody('integrationId', query, body);
      const { revoked } = await connections.disconnect(actor, integrationId);
      return { integrationId, disconnected: true, revoked };
    },
  };
}
