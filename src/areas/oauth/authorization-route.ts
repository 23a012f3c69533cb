import express, { type Request, type Router } from 'express';
import { getOAuthProtectedResourceMetadataUrl, mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { originAllowed, SESSION_COOKIE } from '../../http/auth';
import type { SessionService } from '../sessions/service';
import { OAUTH_SCOPES, type OAuthService, type PendingAuthorization } from './service';

/** The consent page the authorization endpoint sends the browser to. */
export const CONSENT_PATH = '/oauth/consent';
/** The protected resource: the workspace's MCP server. */
export const MCP_RESOURCE_PATH = '/mcp';

export interface OAuthRouteOptions {
  /** The issuer: the service's public base URL (see `oauthIssuer`); null: no authorization server. */
  publicUrl: string | null;
  allowedOrigins: string[];
}

/**
 * The issuer for PUBLIC_URL: an https URL, or http on a loopback host (development); any other
 * URL (or none) cannot be an OAuth issuer (RFC 8414), and then no authorization server is served.
 */
export function oauthIssuer(publicUrl: string | null): string | null {
  if (publicUrl === null) return null;
  const url = new URL(publicUrl);
  return url.protocol === 'https:' || ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname) ? publicUrl : null;
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The pages' policy: the consent form posts here, and its answer redirects to the client (`formTarget`). */
const pagePolicy = (formTarget?: string) =>
  `default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'${formTarget ? ` ${formTarget}` : ''}`;

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escape(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font:inherit;margin-right:.5rem}</style></head>
<body><h1>${escape(title)}</h1>${body}</body></html>
`;
}

function consentForm(request: PendingAuthorization, userId: string): string {
  const scopes = request.scopes.map((scope) => `<li><code>${escape(scope)}</code></li>`).join('');
  return page(
    'Connect to your workspace?',
    `<p><strong>${escape(request.clientName)}</strong> asks to use your workspace as <strong>${escape(userId)}</strong>, with:</p><ul>${scopes}</ul>
<p>It will be sent back to <code>${escape(request.redirectUri)}</code>. Tools that change data still ask for your approval.</p>
<form method="post" action="${CONSENT_PATH}"><input type="hidden" name="request" value="${escape(request.requestId)}">
<button name="decision" value="approve">Allow</button><button name="decision" value="deny">Deny</button></form>`,
  );
}

/** The CSP source of a redirect URI: its origin, or its scheme for an app's own (`cursor://…`). */
function formTargetOf(redirectUri: string): string {
  const url = new URL(redirectUri);
  return url.origin !== 'null' ? url.origin : url.protocol;
}

/**
 * The OAuth 2.1 authorization server of `/mcp` (the MCP authorization specification): the MCP
 * SDK's `mcpAuthRouter` serves the metadata (RFC 8414, and RFC 9728 for `/mcp`), dynamic client
 * registration, `/authorize` (PKCE), `/token` and `/revoke` over `OAuthService`; this router adds
 * the consent page, which asks the user signed in with the browser session. The issuer is
 * PUBLIC_URL (`http://localhost:<PORT>` by default outside production); without it, none.
 */
export function oauthRouter(oauth: OAuthService, sessions: Pick<SessionService, 'resolve'>, options: OAuthRouteOptions): Router {
  const router = express.Router();
  if (options.publicUrl === null) return router;
  router.use(
    mcpAuthRouter({
      provider: oauth,
      issuerUrl: new URL(options.publicUrl),
      resourceServerUrl: new URL(MCP_RESOURCE_PATH, options.publicUrl),
      scopesSupported: [...OAUTH_SCOPES],
      resourceName: 'AI workspace',
    }),
  );

  const signedInUser = async (req: Request): Promise<string | null> => {
    const cookie: unknown = req.signedCookies?.[SESSION_COOKIE];
    return typeof cookie === 'string' && cookie !== '' ? sessions.resolve(cookie) : null;
  };
  const answer = (res: express.Response, status: number, html: string, formTarget?: string) => {
    // same-origin: the consent form's post carries the page's Origin (no-referrer would send `null`).
    res.set('Cache-Control', 'no-store').set('Referrer-Policy', 'same-origin').set('Content-Security-Policy', pagePolicy(formTarget));
    res.status(status).type('html').send(html);
  };

  router.get(CONSENT_PATH, async (req, res) => {
    const requestId = typeof req.query.request === 'string' ? req.query.request : '';
    const request = requestId ? await oauth.pending(requestId) : undefined;
    if (!request)
      return answer(
        res,
        404,
        page('Request not found', '<p>This sign-in request is unknown, already decided or expired. Start again from your application.</p>'),
      );
    const userId = await signedInUser(req);
    if (!userId) return answer(res, 401, page('Sign in first', '<p>Sign in to the workspace in this browser, then reload this page.</p>'));
    answer(res, 200, consentForm(request, userId), formTargetOf(request.redirectUri));
  });

  router.post(CONSENT_PATH, express.urlencoded({ extended: false, limit: '4kb' }), async (req, res) => {
    const { request: requestId, decision } = (req.body ?? {}) as Record<string, unknown>;
    // A form of this service's own page (or an allowed origin): never a cross-site post.
    if (!originAllowed(req, options.allowedOrigins))
      return answer(res, 403, page('Not allowed', '<p>This form must be sent from the workspace.</p>'));
    const userId = await signedInUser(req);
    if (!userId) return answer(res, 401, page('Sign in first', '<p>Sign in to the workspace in this browser, then try again.</p>'));
    if (typeof requestId !== 'string' || (decision !== 'approve' && decision !== 'deny')) {
      return answer(res, 400, page('Not understood', '<p>The form is missing its request or decision.</p>'));
    }
    const target = await oauth.decide(requestId, userId, decision === 'approve');
    if (!target) return answer(res, 404, page('Request not found', '<p>This sign-in request is unknown, already decided or expired.</p>'));
    res.set('Cache-Control', 'no-store').redirect(303, target);
  });
  return router;
}

/** The protected resource of the issuer PUBLIC_URL gives, or null when it gives none. */
export function mcpResource(publicUrl: string | null): string | null {
  const issuer = oauthIssuer(publicUrl);
  return issuer === null ? null : new URL(MCP_RESOURCE_PATH, issuer).href;
}

/** The `resource_metadata` auth-param of a 401 from `/mcp` (RFC 9728), or undefined elsewhere. */
export function mcpChallenge({ publicUrl }: OAuthRouteOptions): (req: Request) => string | undefined {
  if (publicUrl === null) return () => undefined;
  const metadata = `resource_metadata="${getOAuthProtectedResourceMetadataUrl(new URL(MCP_RESOURCE_PATH, publicUrl))}"`;
  return (req) => (req.path === MCP_RESOURCE_PATH ? metadata : undefined);
}
