import { fromQueryOrBody, type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { presentPrincipal } from './presenter';
import type { PrincipalService, Role } from './service';

export function principalHandlers(
  principals: PrincipalService,
): Pick<HandlerMap, 'listAdminPrincipals' | 'grantAdminPrincipal' | 'revokeAdminPrincipal'> {
  return {
    listAdminPrincipals: async () => ({ principals: (await principals.list()).map(presentPrincipal) }),
    grantAdminPrincipal: async ({ actor, body }) => ({ principal: presentPrincipal(await principals.grant(actor, body)) }),
    revokeAdminPrincipal: async ({ actor, query, body }) => {
      const userId = idFromQueryOrBody('userId', query, body);
      const role = fromQueryOrBody('role', query, body) as Role | undefined;
      return { userId, revoked: await principals.revoke(actor, { userId, role }) };
    },
  };
}
