import type { Request, RequestHandler, Response } from 'express';
import helmet, { type HelmetOptions } from 'helmet';

/**
 * The headers of the API's answers (JSON, files, events): those that still mean something for a
 * response that is not a page, as the OWASP REST guidance lists them. A content policy that allows
 * nothing and no framing; no headers that only browsers' handling of documents reads (COOP,
 * Origin-Agent-Cluster, DNS prefetch), nor those of retired browsers and plug-ins
 * (X-XSS-Protection, X-Download-Options, X-Permitted-Cross-Domain-Policies).
 */
export const API_HEADERS: Readonly<HelmetOptions> = {
  contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
  crossOriginEmbedderPolicy: false,
  crossOriginOpenerPolicy: false,
  originAgentCluster: false,
  xDnsPrefetchControl: false,
  xDownloadOptions: false,
  xFrameOptions: { action: 'deny' },
  xPermittedCrossDomainPolicies: false,
  xXssProtection: false,
};

/** The headers of the reference page and its assets (`/docs`): helmet's defaults for documents. */
export const DOCUMENT_HEADERS: Readonly<HelmetOptions> = { crossOriginEmbedderPolicy: false };

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
  const headers = constantHeaders(set);
  return (_req, res, next) => {
    setConstantHeaders(res, headers);
    for (let i = 0; i < removed.length; i += 1) res.removeHeader(removed[i] as string);
    next();
  };
}

/** Headers that are the same on every response, as names and values walked by index (no tuple per header). */
export interface ConstantHeaders {
  names: readonly string[];
  values: readonly string[];
}

export function constantHeaders(headers: Iterable<readonly [string, string]>): ConstantHeaders {
  const names: string[] = [];
  const values: string[] = [];
  for (const [name, value] of headers) {
    names.push(name);
    values.push(value);
  }
  return { names, values };
}

export function setConstantHeaders(res: Response, { names, values }: ConstantHeaders): void {
  for (let i = 0; i < names.length; i += 1) res.setHeader(names[i] as string, values[i] as string);
}
