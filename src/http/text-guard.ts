import type { NextFunction, Request, Response } from 'express';
import { type ErrorDetail, errors } from './errors';

/**
 * Text the database cannot store faithfully: NUL (Postgres refuses it, "invalid byte sequence") and
 * UTF-16 surrogates without their pair (not Unicode text; stored as U+FFFD, silently changed).
 * Every other character, control characters included, is valid text and passes.
 */
const NUL = /\u0000/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** More would only lengthen the answer: the client has enough to find the others. */
const MAX_DETAILS = 20;

function problem(text: string): string | null {
  if (NUL.test(text)) return 'must not contain the NUL character (U+0000)';
  if (LONE_SURROGATE.test(text)) return 'must not contain a lone UTF-16 surrogate (U+D800–U+DFFF)';
  return null;
}

/** A JSON Pointer segment; the refused characters of a property name are shown as U+FFFD. */
const segment = (key: string) => key.replace(UNSTORABLE, '\uFFFD').replace(/~/g, '~0').replace(/\//g, '~1');

function walk(value: unknown, path: string, found: ErrorDetail[]): void {
  if (found.length >= MAX_DETAILS) return;
  if (typeof value === 'string') {
    const message = problem(value);
    if (message) found.push({ path, message });
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => walk(item, `${path}/${index}`, found));
    return;
  }
  // Parsed JSON and query objects only (a streamed upload leaves no body here).
  if (typeof value !== 'object' || value === null || Buffer.isBuffer(value)) return;
  for (const [key, item] of Object.entries(value)) {
    const keyProblem = problem(key);
    if (keyProblem && found.length < MAX_DETAILS) found.push({ path: `${path}/${segment(key)}`, message: `the property name ${keyProblem}` });
    walk(item, `${path}/${segment(key)}`, found);
  }
}

/**
 * Refuses a request whose JSON body (values and property names, at any depth), query or path
 * parameters hold text the database cannot store: `400 invalid_request` with a detail per field,
 * before request validation and so before any handler. Headers need no check: Node's parser
 * refuses NUL in them, and a header's bytes are Latin-1, never a surrogate.
 */
export function refuseUnstorableText(req: Request, _res: Response, next: NextFunction): void {
  const found: ErrorDetail[] = [];
  walk(req.params, '/path', found);
  walk(req.query, '/query', found);
  walk(req.body, '/body', found);
  if (found.length === 0) return next();
  next(errors.invalidRequest('The request holds text that cannot be stored.', found));
}
