import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentGrant } from './presenter';
import type { GrantService } from './service';

export function grantHandlers(grants: GrantService): Pick<HandlerMap, 'listGrants' | 'createGrant' | 'deleteGrant'> {
  return {
    listGrants: async ({ caller, query }) => {
      const page = await grants.list(caller, query.resourceKind, query.resourceId, readPage(query));
      return { grants: page.items.map(presentGrant), nextCursor: page.nextCursor };
    },
    createGrant: async ({ caller, body }) => ({ grant: presentGrant(await grants.grant(caller, body)) }),
    deleteGrant: async ({ caller, query, body }) => {
      const grantId = idFromQueryOrBody('grantId', query, body);
      await grants.revoke(caller, grantId);
      return { grantId, deleted: true };
    },
  };
}
