import corsMiddleware, { type CorsOptions } from 'cors';
import type { RequestHandler } from 'express';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { errors } from '../platform/errors';
import { METHODS } from './openapi';

/** The routes browser clients call: the API, the session route and the document. */
export const CORS_PATHS = ['/api/v1', '/auth/session', '/openapi.json', '/openapi.yaml'];

/** How long a browser may reuse a preflight's answer. */
export const CORS_MAX_AGE_SECONDS = 600;

/** Response headers the service sets that the document does not declare on every operation. */
const ALWAYS_EXPOSED = ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'WWW-Authenticate'];

/** Response headers a script may never read (Set-Cookie) or always reads (Content-Type). */
const NOT_EXPOSED = new Set(['set-cookie', 'content-type']);

interface CorsLists {
  methods: string;
  allowHeaders: string;
  exposeHeaders: string;
}

/** Each name once, in first-seen spelling, case-insensitively. */
function unique(names: Iterable<string>): string[] {
  const seen = new Map<string, string>();
  for (const name of names) if (!seen.has(name.toLowerCase())) seen.set(name.toLowerCase(), name);
  return [...seen.values()];
}

/**
 * The lists a preflight and an answer carry, read from the document: every method it declares, the
 * request headers it declares (plus Authorization and Content-Type), the response headers it
 * declares (plus those in ALWAYS_EXPOSED).
 */
export function corsLists(doc: OpenAPIV3.DocumentV3): CorsLists {
  const methods = new Set<string>();
  const requestHeaders = ['Authorization', 'Content-Type'];
  const responseHeaders = [...ALWAYS_EXPOSED];
  const visit = (node: unknown): void => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(visit);
    const record = node as Record<string, unknown>;
    if (record.in === 'header' && typeof record.name === 'string') requestHeaders.push(record.name);
    const headers = record.headers;
    // A response's `headers` map (an encoding's is never inside a response here).
    if (headers && typeof headers === 'object' && !Array.isArray(headers) && 'description' in record)
      responseHeaders.push(...Object.keys(headers));
    Object.values(record).forEach(visit);
  };
  for (const method of METHODS) {
    if (Object.values(doc.paths).some((item) => item && method in item)) methods.add(method.toUpperCase());
  }
  visit(doc.paths);
  visit(doc.components?.parameters);
  visit(doc.components?.responses);
  return {
    methods: [...methods].join(', '),
    allowHeaders: unique(requestHeaders).join(', '),
    exposeHeaders: unique(responseHeaders)
      .filter((name) => !NOT_EXPOSED.has(name.toLowerCase()))
      .join(', '),
  };
}

/**
 * CORS for browser clients on the origins in ALLOWED_ORIGINS (the `cors` package, its lists read
 * from the document), for the routes in CORS_PATHS. A preflight from an allowed origin is answered
 * with 204 and the allowed methods and headers; one from any other origin gets 403 without CORS
 * headers (under the Fetch standard the missing Access-Control-Allow-Origin alone makes the
 * browser refuse the call; the 403 shows why in its developer tools). Every other answer to an
 * allowed origin, errors included, carries the origin, credentials (the cookie) and the headers a
 * script may read; answers to other origins carry no CORS header at all.
 */
export function cors(allowedOrigins: readonly string[], doc: OpenAPIV3.DocumentV3): RequestHandler[] {
  const allowed = new Set(allowedOrigins);
  const { methods, allowHeaders, exposeHeaders } = corsLists(doc);
  const granted: CorsOptions = {
    origin: true,
    credentials: true,
    methods,
    allowedHeaders: allowHeaders,
    exposedHeaders: exposeHeaders,
    maxAge: CORS_MAX_AGE_SECONDS,
    optionsSuccessStatus: 204,
  };
  // The answer depends on Origin, so caches keep one per origin; a foreign preflight is refused.
  const varyAndRefuse: RequestHandler = (req, res, next) => {
    res.vary('Origin');
    const origin = req.headers.origin;
    const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    if (preflight && origin !== undefined && !allowed.has(origin))
      return next(errors.forbidden('This origin may not call the service from a browser.'));
    next();
  };
  return [
    varyAndRefuse,
    corsMiddleware((req, callback) => callback(null, allowed.has(req.headers.origin ?? '') ? granted : { origin: false })),
  ];
}
