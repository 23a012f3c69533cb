import type { Request, RequestHandler, Response } from 'express';
import helmet, { type HelmetOptions } from 'helmet';

/**
 * helmet's security headers, recorded once at start-up and set in one step per response. With no
 * per-request directives (no CSP nonces) every header is a constant, so running helmet's chain of
 * a dozen middleware for each request only repeated the same work.
 */
export function securityHeaders(options: Readonly<HelmetOptions>): RequestHandler {
  const csp = options.contentSecurityPolicy;
  const directives = typeof csp === 'object' ? Object.values(csp.directives ?? {}) : [];
  if (directives.some((value) => typeof value === 'function' || (Array.isArray(value) && value.some((entry) => typeof entry === 'function')))) {
    throw new Error('a Content-Security-Policy directive computed per request cannot be recorded once');
  }
  const set: Array<[string, string]> = [];
  const removed: string[] = [];
  const recorder = {
    setHeader: (name: string, value: string | number) => set.push([name, String(value)]),
    removeHeader: (name: string) => removed.push(name),
  };
  let done = false;
  helmet(options)({} as Request, recorder as unknown as Response, (error?: unknown) => {
    if (error) throw error instanceof Error ? error : new Error(String(error));
    done = true;
  });
  if (!done) throw new Error('helmet did not set its headers at once');
  return (_req, res, next) => {
    for (const [name, value] of set) res.setHeader(name, value);
    for (const name of removed) res.removeHeader(name);
    next();
  };
}
