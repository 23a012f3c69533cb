import type { CookieOptions } from 'express';
import { SESSION_COOKIE } from '../../http/auth';
import { errors } from '../../platform/errors';
import type { HandlerMap } from '../../http/handler';
import type { SessionService } from './service';

export function sessionHandlers(
  sessions: SessionService,
  cookie: { secure: boolean },
): Pick<HandlerMap, 'createSession' | 'deleteSession'> {
  const options: CookieOptions = { httpOnly: true, secure: cookie.secure, sameSite: 'lax', path: '/', signed: true };
  return {
    createSession: async ({ caller, res }) => {
      // A session holds every scope: a token that holds fewer cannot start one.
      if (caller.accessToken) throw errors.forbidden('A personal access token cannot start a browser session.');
      const session = await sessions.create(caller.userId);
      res.cookie(SESSION_COOKIE, session.token, { ...options, expires: session.expiresAt });
      return {
        session: {
          userId: session.userId,
          createdAt: session.createdAt.getTime(),
          expiresAt: session.expiresAt.getTime(),
        },
      };
    },
    deleteSession: async ({ caller, res }) => {
      if (!caller.sessionToken) throw errors.unauthenticated('This route needs the session cookie.');
      await sessions.end(caller.sessionToken);
      res.clearCookie(SESSION_COOKIE, options);
      return { ended: true };
    },
  };
}
