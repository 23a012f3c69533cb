import type { RequestHandler, Response } from 'express';
import { type RateDecision, type RateLimiter } from '../platform/rate-limiter';
import { errors } from '../platform/errors';

/**
 * The per-user request limit, counted by `limiter` (shared through the database, or in this
 * process on the embedded one) under `user:<id>` (the auth-failure limit counts `auth-failures:<ip>`):
 * `429 rate_limited` with `Retry-After` over it, and the IETF draft's `RateLimit-*` headers on
 * every authenticated answer.
 */
export function perUserRateLimit(limiter: RateLimiter, perMinute: number): RequestHandler {
  return async function perUserRateLimitMiddleware(req, res, next) {
    const userId = req.caller?.userId;
    if (userId === undefined) return next();
    const decision = await limiter.consume(`user:${userId}`);
    setHeaders(res, perMinute, decision);
    if (decision.allowed) next();
    else next(errors.rateLimited(Math.max(1, Math.ceil(decision.resetMs / 1000)), perMinute));
  };
}

/**
 * The limit of each personal access token (`token:<id>`), within its user's: software running
 * with one token cannot use up its user's whole allowance. Its headers replace the user's when
 * it is the tighter of the two.
 */
export function perTokenRateLimit(limiter: RateLimiter, perMinute: number): RequestHandler {
  return async function perTokenRateLimitMiddleware(req, res, next) {
    const tokenId = req.caller?.accessToken?.tokenId;
    if (tokenId === undefined) return next();
    const decision = await limiter.consume(`token:${tokenId}`);
    const userRemaining = Number(res.getHeader('RateLimit-Remaining') ?? Infinity);
    if (decision.remaining <= userRemaining) setHeaders(res, perMinute, decision);
    if (decision.allowed) next();
    else next(errors.rateLimited(Math.max(1, Math.ceil(decision.resetMs / 1000)), perMinute));
  };
}

/** The limit, what is left, seconds until the window resets. */
function setHeaders(res: Response, limit: number, decision: RateDecision): void {
  res.setHeader('RateLimit-Limit', String(limit));
  res.setHeader('RateLimit-Remaining', String(decision.remaining));
  res.setHeader('RateLimit-Reset', String(Math.ceil(decision.resetMs / 1000)));
}
