import type { NextFunction, Request, Response } from 'express';
import { type ErrorDetail, errors } from '../platform/errors';

/**
 * Text the database cannot store faithfully: NUL (Postgres refuses it, "invalid byte sequence") and
 * UTF-16 surrogates without their pair (not Unicode text; stored as U+FFFD, silently changed).
 * Every other character, control characters included, is valid text and passes.
 */
const NUL = /\u0000/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The deepest nesting of arrays and objects a request may hold, the body itself being level 1.
 * No schema of the document nests half as deep, free-form values (settings `ui`, tool arguments)
 * included; deeper data would overflow the stack of the recursive code after this guard (the
 * validator, the canonical JSON of an idempotency key, serialisation).
 */
export const MAX_NESTING = 64;
const TOO_DEEP = `must not be nested more than ${MAX_NESTING} levels deep (the nesting limit)`;

/** More would only lengthen the answer: the client has enough to find the others. */
const MAX_DETAILS = 20;

function problem(text: string): string | null {
  if (NUL.test(text)) return 'must not contain the NUL character (U+0000)';
  if (LONE_SURROGATE.test(text)) return 'must not contain a lone UTF-16 surrogate (U+D800–U+DFFF)';
  return null;
}

/** A JSON Pointer segment; the refused characters of a property name are shown as U+FFFD. */
const segment = (key: string) => key.replace(UNSTORABLE, '\uFFFD').replace(/~/g, '~0').replace(/\//g, '~1');

/** Parsed JSON and query objects only (a streamed upload leaves no body here, a raw one a Buffer). */
const isContainer = (value: unknown): value is object => typeof value === 'object' && value !== null && !Buffer.isBuffer(value);

/** An array or object being walked: its pointer, its level, its property names (arrays: none) and the next child. */
interface Frame {
  path: string;
  level: number;
  value: unknown[] | Record<string, unknown>;
  keys: string[] | null;
  next: number;
}

/**
 * Appends a detail per unstorable string or property name and per container deeper than
 * MAX_NESTING under `root`, in document order. Iterative, with an explicit stack, so that no
 * input depth can overflow the call stack; a container past the limit is not entered.
 */
function inspect(root: unknown, rootPath: string, found: ErrorDetail[]): void {
  if (typeof root === 'string') {
    const message = problem(root);
    if (message) found.push({ path: rootPath, message });
    return;
  }
  if (!isContainer(root)) return;
  const stack: Frame[] = [];
  const enter = (value: object, path: string, level: number) => {
    if (level > MAX_NESTING) found.push({ path, message: TOO_DEEP });
    else stack.push({ path, level, value: value as Frame['value'], keys: Array.isArray(value) ? null : Object.keys(value), next: 0 });
  };
  enter(root, rootPath, 1);
  while (stack.length > 0 && found.length < MAX_DETAILS) {
    const frame = stack[stack.length - 1]!;
    const count = frame.keys ? frame.keys.length : (frame.value as unknown[]).length;
    if (frame.next >= count) {
      stack.pop();
      continue;
    }
    const index = frame.next++;
    const key = frame.keys ? frame.keys[index]! : undefined;
    const item = key === undefined ? (frame.value as unknown[])[index] : (frame.value as Record<string, unknown>)[key];
    const path = () => `${frame.path}/${key === undefined ? index : segment(key)}`;
    if (key !== undefined) {
      const keyProblem = problem(key);
      if (keyProblem) found.push({ path: path(), message: `the property name ${keyProblem}` });
    }
    if (typeof item === 'string') {
      const message = problem(item);
      if (message && found.length < MAX_DETAILS) found.push({ path: path(), message });
    } else if (isContainer(item) && found.length < MAX_DETAILS) {
      enter(item, path(), frame.level + 1);
    }
  }
}

/**
 * Refuses a request whose JSON body (values and property names, at any depth), query or path
 * parameters hold text the database cannot store, or whose body nests arrays and objects deeper
 * than MAX_NESTING: `400 invalid_request` with a detail per field, before request validation and
 * so before any handler. Headers need no check: Node's parser refuses NUL in them, and a header's
 * bytes are Latin-1, never a surrogate.
 */
export function refuseUnstorableText(req: Request, _res: Response, next: NextFunction): void {
  const found: ErrorDetail[] = [];
  inspect(req.params, '/path', found);
  inspect(req.query, '/query', found);
  inspect(req.body, '/body', found);
  if (found.length === 0) return next();
  const tooDeep = found.some((detail) => detail.message === TOO_DEEP);
  const unstorable = found.some((detail) => detail.message !== TOO_DEEP);
  const message = [unstorable && 'holds text that cannot be stored', tooDeep && `is nested more than ${MAX_NESTING} levels deep`]
    .filter(Boolean)
    .join(' and ');
  next(errors.invalidRequest(`The request ${message}.`, found));
}
