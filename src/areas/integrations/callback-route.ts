import express, { type Router } from 'express';
import { SESSION_COOKIE } from '../../http/auth';
import type { SessionService } from '../sessions/service';
import type { IntegrationAuthorizationService } from './authorization';
import { CALLBACK_PATH, type CallbackOutcome } from './service';

export interface CallbackRouteOptions {
  /** The web-app page the browser is sent back to with the outcome; null: a small page says it. */
  returnUrl: string | null;
}

/** The status of the page that tells an outcome. */
const STATUS: Record<string, number> = { connected: 200, sign_in_required: 403, wrong_user: 403, disabled: 403, exchange_failed: 502 };

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(outcome: CallbackOutcome): string {
  const title = outcome.status === 'connected' ? 'Connected' : 'Not connected';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}</style></head>
<body><h1>${title}</h1><p>${escape(outcome.message)}</p><p>You can close this window.</p></body></html>
`;
}

/**
 * `GET /integrations/callback`: the OAuth redirect URI, a web-app route outside /api/v1 reached by
 * the user's browser, which brings the authorization server's `code` and `state` (or `error`). It
 * completes only when the browser presents a live browser session (the `service_session` cookie)
 * of the user who started connecting, with the single-use state. It answers a small page (or a
 * `303` to the configured web-app URL with `integration`, `status` and `reason`) and never shows
 * a token or the code.
 */
export function integrationCallbackRouter(
  authorization: Pick<IntegrationAuthorizationService, 'complete'>,
  sessions: Pick<SessionService, 'resolve'>,
  options: CallbackRouteOptions,
): Router {
  const router = express.Router();
  router.get(CALLBACK_PATH, async (req, res) => {
    const search = req.originalUrl.includes('?') ? req.originalUrl.slice(req.originalUrl.indexOf('?') + 1) : '';
    const cookie: unknown = req.signedCookies?.[SESSION_COOKIE];
    const sessionUserId = typeof cookie === 'string' && cookie !== '' ? await sessions.resolve(cookie) : null;
    const outcome = await authorization.complete({ query: new URLSearchParams(search), sessionUserId, requestId: req.requestId ?? null });
    res.set('Cache-Control', 'no-store');
    res.set('Referrer-Policy', 'no-referrer');
    if (options.returnUrl !== null) {
      const target = new URL(options.returnUrl);
      target.searchParams.set('integration', outcome.integrationId ?? '');
      target.searchParams.set('status', outcome.status);
      target.searchParams.set('reason', outcome.code);
      res.redirect(303, target.href);
      return;
    }
    res.set(
      'Content-Security-Policy',
      "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    );
    res
      .status(STATUS[outcome.code] ?? 400)
      .type('html')
      .send(page(outcome));
  });
  return router;
}
