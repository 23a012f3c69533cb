import type { NextFunction, Request, Response } from 'express';
import { type SignedGrant, SignedUrlExpiredError, SignedUrlInvalidError, type SignedUrls } from '../platform/signed-urls';
import type { RateLimiter } from '../platform/rate-limiter';
import { InvalidTokenError, type TokenVerifier } from '../platform/tokens';
import { type ApiError, AUTHENTICATION_REQUIRED, errors } from '../platform/errors';
import type { ApiOperation } from './operation';

export const SESSION_COOKIE = 'service_session';

export interface Caller {
  userId: string;
  via: 'bearer' | 'session' | 'signed-url';
  /** The session token, when the caller came in with the session cookie. */
  sessionToken?: string;
  /** What a signed URL (upload or content) allows, when the caller came in with one. */
  grant?: SignedGrant;
  /**
   * The scopes (`read`, `write`, `chat`, `admin`) of the access token the caller came in with;
   * unset when the credentials carry all of them (an identity provider's token, the session).
   */
  scopes?: readonly string[];
  /** The personal access token the caller came in with: its id (the per-token rate limit) and expiry. */
  accessToken?: { tokenId: string; expiresAt: number; resource?: string };
}

/** What a personal access token stands for (the entry wires the access-tokens service). */
export interface AccessTokenIdentity {
  userId: string;
  tokenId: string;
  scopes: readonly string[];
  expiresAt: number;
  /** The one resource (absolute URL) the token was issued for (an OAuth client's), else unset. */
  resource?: string;
}

/** What authentication needs of personal access tokens: which bearer tokens are theirs, and what one stands for. */
export interface AccessTokenResolver {
  recognises(token: string): boolean;
  /** Throws InvalidTokenError (its message the reason) when the token is unknown, revoked or expired. */
  verify(token: string): Promise<AccessTokenIdentity>;
}

const BEARER = /^Bearer\s+(\S+)$/i;
const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** What authentication needs of browser sessions: the user a session token belongs to, or null (the entry wires the sessions service). */
export interface SessionResolver {
  resolve(token: string): Promise<string | null>;
}

/**
 * The handlers of the document's security schemes (run by `authenticate`). Each only
 * records what it verified; `resolveCaller` then picks one (bearer first), so the outcome does not
 * depend on which handler finishes first.
 */
export function securityHandlers(
  verifyToken: TokenVerifier,
  sessions: SessionResolver,
  signedUrls: SignedUrls,
  accessTokens: AccessTokenResolver,
) {
  return {
    signedUrl: async (req: Request): Promise<boolean> => {
      const token = req.query.token;
      if (typeof token !== 'string' || token === '') return false;
      try {
        const grant = await signedUrls.verify(token);
        req.credentials = { ...req.credentials, signed: grant };
        return true;
      } catch (error) {
        if (error instanceof SignedUrlExpiredError) {
          // Genuine but expired: let resolveCaller answer 410 (a handler only says yes or no).
          req.credentials = { ...req.credentials, signedExpired: true };
          return true;
        }
        if (error instanceof SignedUrlInvalidError) {
          req.authFailure = 'The signed URL is not valid.';
          return false;
        }
        throw error;
      }
    },
    bearerAuth: async (req: Request): Promise<boolean> => {
      const header = req.headers.authorization;
      if (header === undefined) return false;
      const token = BEARER.exec(header)?.[1];
      if (!token) {
        req.authFailure ??= 'The Authorization header must be "Bearer <token>".';
        return false;
      }
      try {
        const bearer = accessTokens.recognises(token) ? await accessTokens.verify(token) : { userId: await verifyToken(token) };
        req.credentials = { ...req.credentials, bearer };
        return true;
      } catch (error) {
        if (!(error instanceof InvalidTokenError)) throw error;
        // The token's reason wins over the cookie's: it is what the RFC 6750 challenge reports.
        req.authFailure = error.message;
        req.invalidToken = true;
        return false;
      }
    },
    browserSession: async (req: Request): Promise<boolean> => {
      // cookie-parser gives a cookie whose signature fails as `false`, and an unsigned one in `cookies`.
      const token: unknown = req.signedCookies?.[SESSION_COOKIE];
      if (typeof token !== 'string' || token === '') {
        if (token !== undefined || req.cookies?.[SESSION_COOKIE] !== undefined) req.authFailure ??= 'The session cookie is not valid.';
        return false;
      }
      const userId = await sessions.resolve(token);
      if (!userId) {
        req.authFailure ??= 'The session has ended or expired.';
        return false;
      }
      req.credentials = { ...req.credentials, session: { userId, token } };
      return true;
    },
  };
}

/**
 * Enforces the scope an operation names (`x-scope`) on callers whose token carries scopes:
 * without it, 403 `insufficient_scope` naming the scope. A token issued for one resource (an
 * OAuth client's, RFC 8707) is refused anywhere else as `401 invalid_token`. Runs after the
 * caller is chosen.
 */
export function requireScope(req: Request, _res: Response, next: NextFunction): void {
  const scopes = req.caller?.scopes;
  const needed = req.operation?.['x-scope'];
  if (!scopes || !req.operation) return next();
  const resource = req.caller?.accessToken?.resource;
  if (resource !== undefined && new URL(resource).pathname !== req.path) {
    return next(errors.unauthenticated(`This access token was issued for ${resource} only.`, true));
  }
  if (!needed) throw new Error(`${req.operation.operationId} declares no x-scope`);
  next(scopes.includes(needed) ? undefined : errors.insufficientScope(needed));
}

/** The origins a cookie-authenticated unsafe request may come from: the configured ones, or the service's own. */
export function originAllowed(req: Request, allowedOrigins: string[]): boolean {
  const source = req.headers.origin ?? req.headers.referer;
  if (!source || source === 'null') return false;
  let origin: string;
  try {
    origin = new URL(source).origin;
  } catch {
    return false;
  }
  if (allowedOrigins.includes(origin)) return true;
  return origin === `${req.protocol}://${req.get('host')}`;
}

/**
 * Chooses the caller from the verified credentials (a bearer token wins over the cookie) and
 * applies the CSRF rule: an unsafe request authenticated by the cookie needs an allowed Origin.
 */
export function resolveCaller(allowedOrigins: string[]) {
  return function resolveCallerMiddleware(req: Request, _res: Response, next: NextFunction): void {
    const { bearer, session, signed, signedExpired } = req.credentials ?? {};
    if (signedExpired && !bearer && !session) {
      return next(errors.linkExpired());
    }
    if (bearer && 'tokenId' in bearer) {
      const accessToken = { tokenId: bearer.tokenId, expiresAt: bearer.expiresAt, resource: bearer.resource };
      req.caller = { userId: bearer.userId, via: 'bearer', scopes: bearer.scopes, accessToken };
    } else if (bearer) {
      req.caller = { userId: bearer.userId, via: 'bearer' };
    } else if (signed && !session) {
      req.caller = { userId: signed.userId, via: 'signed-url', grant: signed };
    } else if (session) {
      if (UNSAFE_METHODS.has(req.method) && !originAllowed(req, allowedOrigins)) {
        return next(errors.forbidden('This request needs an Origin header of an allowed origin.'));
      }
      req.caller = { userId: session.userId, via: 'session', sessionToken: session.token };
    }
    next();
  };
}

type SecurityHandler = (req: Request) => Promise<boolean>;

/**
 * Authentication by the operation's declared security (`req.operation`: its own `security`, else
 * the document's): the requirements are alternatives and the schemes within one are all needed.
 * Every scheme the operation names is tried (each handler only records what it verified;
 * `resolveCaller` chooses), a request meeting no requirement is `401` with the first failure a
 * handler recorded, and an unexpected error of a handler (a database that cannot answer)
 * propagates as itself. Nothing is thrown (or given a stack trace) for a scheme a request simply
 * does not use, and the schemes are worked out once per operation.
 */
export function authenticate(
  handlers: Record<string, SecurityHandler>,
  onFailure: (req: Request) => Promise<ApiError | null> = async () => null,
) {
  const plans = new WeakMap<ApiOperation, { schemes: string[]; requirements: string[][] }>();
  const planOf = (operation: ApiOperation) => {
    let plan = plans.get(operation);
    if (!plan) {
      const requirements = operation.security.map((requirement) => Object.keys(requirement));
      const schemes = [...new Set(requirements.flat())];
      for (const scheme of schemes) if (!handlers[scheme]) throw new Error(`no security handler for "${scheme}"`);
      plan = { schemes, requirements };
      plans.set(operation, plan);
    }
    return plan;
  };
  return async function authenticateMiddleware(req: Request, _res: Response, next: NextFunction): Promise<void> {
    if (!req.operation) throw new Error(`authentication runs on the document's routes only (${req.method} ${req.path})`);
    const { schemes, requirements } = planOf(req.operation);
    if (requirements.length === 0) return next();
    const verified = new Set<string>();
    await Promise.all(
      schemes.map(async (scheme) => {
        if (await (handlers[scheme] as SecurityHandler)(req)) verified.add(scheme);
      }),
    );
    if (requirements.some((requirement) => requirement.every((scheme) => verified.has(scheme)))) return next();
    next((await onFailure(req)) ?? errors.unauthenticated(req.authFailure ?? AUTHENTICATION_REQUIRED, req.invalidToken));
  };
}

/**
 * Counts the failed authentications of each client address (`req.ip`, which honours TRUST_PROXY)
 * by `limiter`; over `perMinute`, a failure is answered `429 rate_limited` instead of `401`.
 * Only requests that presented credentials count (one without any costs no verification), and a
 * request that authenticates is never refused, so users sharing an address with a prober keep
 * working.
 */
export function limitAuthFailures(limiter: RateLimiter, perMinute: number) {
  return async (req: Request): Promise<ApiError | null> => {
    if (req.authFailure === undefined) return null;
    const decision = await limiter.consume(`auth-failures:${req.ip ?? ''}`);
    return decision.allowed ? null : errors.authFailuresLimited(Math.max(1, Math.ceil(decision.resetMs / 1000)), perMinute);
  };
}
