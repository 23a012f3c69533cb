import type { Caller } from '../../http/auth';
import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { errors } from '../../platform/errors';
import { presentAccessToken } from './presenter';
import type { AccessTokenService } from './service';

/**
 * Tokens are created and revoked with the user's own sign-in (the identity provider's token or the
 * session), never with a token: a leaked token could otherwise mint copies that outlive its
 * revocation, or revoke the others.
 */
function refuseTokens(caller: Caller): void {
  if (caller.accessToken) throw errors.forbidden('Access tokens are created and revoked with your own sign-in, not with an access token.');
}

export function accessTokenHandlers(
  tokens: AccessTokenService,
): Pick<HandlerMap, 'getAccessTokens' | 'createAccessToken' | 'revokeAccessToken' | 'getAdminAccessTokens' | 'revokeAdminAccessToken'> {
  return {
    getAccessTokens: async ({ caller, query }) => {
      const now = Date.now();
      if (query.tokenId !== undefined) return { accessToken: presentAccessToken(await tokens.get(query.tokenId, caller.userId), now) };
      const page = await tokens.list(caller.userId, readPage(query));
      return { accessTokens: page.items.map((row) => presentAccessToken(row, now)), nextCursor: page.nextCursor };
    },
    createAccessToken: async ({ caller, actor, body }) => {
      refuseTokens(caller);
      const { row, token } = await tokens.create(actor, body);
      return { accessToken: presentAccessToken(row, Date.now()), token };
    },
    revokeAccessToken: async ({ caller, actor, query, body }) => {
      refuseTokens(caller);
      const row = await tokens.revoke(actor, idFromQueryOrBody('tokenId', query, body), caller.userId);
      return { accessToken: presentAccessToken(row, Date.now()) };
    },
    getAdminAccessTokens: async ({ query }) => {
      const now = Date.now();
      if (query.tokenId !== undefined) return { accessToken: presentAccessToken(await tokens.get(query.tokenId), now, true) };
      const page = await tokens.listAll({ userId: query.userId }, readPage(query));
      return { accessTokens: page.items.map((row) => presentAccessToken(row, now, true)), nextCursor: page.nextCursor };
    },
    revokeAdminAccessToken: async ({ actor, query, body }) => {
      const row = await tokens.revoke(actor, idFromQueryOrBody('tokenId', query, body));
      return { accessToken: presentAccessToken(row, Date.now(), true) };
    },
  };
}
