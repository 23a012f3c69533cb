import { createHash } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import type { operations } from '../../generated/api';
import type { IdempotencyStore } from '../platform/idempotency';
import type { Caller } from './auth';
import { errors } from '../platform/errors';
import { runIdempotent } from './idempotency';

export type OperationId = keyof operations;

type JsonContent<T> = T extends { content: { 'application/json': infer B } } ? B : never;

/** The JSON request body of an operation (`undefined` for operations without one). */
export type RequestBody<K extends OperationId> = operations[K] extends { requestBody: infer R }
  ? JsonContent<R>
  : operations[K] extends { requestBody?: infer R }
    ? JsonContent<NonNullable<R>> | undefined
    : undefined;

type Parameters<K extends OperationId, In extends 'query' | 'path'> = operations[K]['parameters'] extends {
  [P in In]?: infer Q;
}
  ? [Q] extends [never]
    ? Record<string, never>
    : NonNullable<Q>
  : Record<string, never>;

export type QueryParams<K extends OperationId> = Parameters<K, 'query'>;
export type PathParams<K extends OperationId> = Parameters<K, 'path'>;

/** What a handler returns when it has written a streamed (non-JSON) 200 body itself. */
export const STREAMED: unique symbol = Symbol('streamed');

/**
 * Operations whose 200 is JSON or an event stream, as the request asks: `sendMessage`, whose
 * 1.0.0 200 was either (the document now gives the stream its own operation, and it still
 * streams for 1.0.0 clients that ask), and OpenAI's chat completions (one operation for both, as
 * OpenAI's clients call it).
 */
type LegacyStreaming = 'sendMessage' | 'createChatCompletion';

/** Operations whose answer (JSON or an event stream) a protocol library writes itself: the MCP SDK's transport. */
type ProtocolAnswered = 'mcpRequest';

/**
 * A JSON body sent with a strong `ETag` (the SHA-256 of its JSON), or answered `304` without a
 * body when the request's `If-None-Match` names that tag.
 */
export class Tagged<T> {
  constructor(readonly body: T) {}
}

/** `body` answered with its ETag (see Tagged). */
export const tagged = <T>(body: T) => new Tagged<T>(body);
/** The 200 body of an operation as the document defines it, or STREAMED for a non-JSON body. */
export type OkBody<K extends OperationId> = operations[K]['responses'] extends { 200: infer R }
  ? [JsonContent<R>] extends [never]
    ? typeof STREAMED
    : JsonContent<R> | Tagged<JsonContent<R>> | (K extends LegacyStreaming | ProtocolAnswered ? typeof STREAMED : never)
  : never;

/** The caller as audit events record it: user and request id (structurally the audit service's Actor). */
export interface Actor {
  userId: string;
  requestId: string | null;
}

export interface HandlerInput<K extends OperationId> {
  caller: Caller;
  /** The caller as audit events record it: user and request id. */
  actor: Actor;
  body: RequestBody<K>;
  query: QueryParams<K>;
  params: PathParams<K>;
  req: Request;
  res: Response;
}

/** A handler of one operation, typed from the generated document: its input and its 200 body. */
export type Handler<K extends OperationId> = (input: HandlerInput<K>) => Promise<OkBody<K>>;

/**
 * A handler of an operation that needs no authentication (`security: []`): it has no caller. Any
 * credentials sent along are not even read.
 */
export type PublicHandler<K extends OperationId> = (input: Omit<HandlerInput<K>, 'caller' | 'actor'>) => Promise<OkBody<K>>;

/** One handler for every operation of the document; a missing one is a compile error. */
export type HandlerMap = { [K in OperationId]: Handler<K> };

export interface HandlerOptions {
  operationId: OperationId;
  /**
   * Whether a body `userId` names the caller (the compatibility field of the reference, refused
   * when it is someone else) rather than the user an administrative operation acts on.
   */
  userIdIsCaller: boolean;
  /** Whether the operation needs no authentication (`security: []`): its handler is a PublicHandler. */
  anonymous?: boolean;
  /** Set for operations that declare the `Idempotency-Key` header. */
  idempotency?: IdempotencyStore;
}

/**
 * Runs a handler after validation: identity comes from the caller, so a body `userId` that names
 * someone else is refused and `accessToken` is dropped before the handler sees the body. With an
 * `Idempotency-Key`, the handler runs at most once per key.
 */
export function toExpressHandler<K extends OperationId>(handler: Handler<K>, options: HandlerOptions): RequestHandler {
  /** Writes a handler's result: nothing for STREAMED, a tagged body with its ETag (or 304), or a 200 JSON body. */
  const answer = (req: Request, res: Response, result: unknown): void => {
    if (result === STREAMED) return;
    if (result instanceof Tagged) {
      if (!notModified(req, res, JSON.stringify(result.body))) res.status(200).json(result.body);
      return;
    }
    res.status(200).json(result);
  };
  return async (req, res) => {
    if (options.anonymous) {
      const input = { body: req.body as RequestBody<K>, query: req.query as QueryParams<K>, params: req.params as PathParams<K>, req, res };
      answer(req, res, await (handler as PublicHandler<K>)(input));
      return;
    }
    const caller = req.caller;
    if (!caller) throw errors.unauthenticated();
    const body = req.body as Record<string, unknown> | undefined;
    if (body && typeof body === 'object' && !Array.isArray(body)) {
      if (options.userIdIsCaller) {
        if (body.userId !== undefined && body.userId !== caller.userId) {
          throw errors.forbidden('The userId in the request does not match the authenticated user.');
        }
        delete body.userId;
      }
      delete body.accessToken;
    }
    const store = options.idempotency;
    const execute = () =>
      handler({
        caller,
        actor: { userId: caller.userId, requestId: req.requestId },
        body: req.body as RequestBody<K>,
        query: req.query as QueryParams<K>,
        params: req.params as PathParams<K>,
        req,
        res,
      });
    const key = store ? req.get('idempotency-key') : undefined;
    if (store && key !== undefined) {
      const request = { store, userId: caller.userId, key, operationId: options.operationId, body: req.body };
      const outcome = await runIdempotent(request, execute);
      if (outcome.replayed) res.set('Idempotent-Replayed', 'true');
      res.status(200).json(outcome.body);
      return;
    }
    answer(req, res, await execute());
  };
}

/**
 * Sets a tagged body's strong `ETag` (the SHA-256 of its JSON text) and answers `304` without a
 * body when the request's `If-None-Match` names it; true when it did.
 */
function notModified(req: Request, res: Response, text: string): boolean {
  const etag = `"${createHash('sha256').update(text).digest('base64url')}"`;
  res.setHeader('ETag', etag);
  res.setHeader('Cache-Control', 'private, no-cache');
  if (!noneMatch(req.get('if-none-match'), etag)) return false;
  res.status(304).end();
  return true;
}

/** Whether an If-None-Match header names `etag` (compared weakly: `W/"…"` names it too) or is `*`. */
export function noneMatch(header: string | undefined, etag: string): boolean {
  return header !== undefined && header.split(',').some((tag) => [etag, `W/${etag}`, '*'].includes(tag.trim()));
}

/**
 * A parameter a DELETE may take in the query or in the JSON body (the reference's
 * `DELETE /api/v1/admin/principals` takes it in the body); given in both, they must agree.
 */
export function fromQueryOrBody(
  name: string,
  query: Record<string, unknown>,
  body: Record<string, unknown> | undefined,
): string | undefined {
  const fromQuery = query[name];
  const fromBody = body?.[name];
  if (fromQuery !== undefined && fromBody !== undefined && fromQuery !== fromBody) {
    throw errors.invalidRequest(`${name} in the query and in the body differ.`, [
      { path: `/body/${name}`, message: `must equal the query parameter ${name}` },
    ]);
  }
  const value = fromQuery ?? fromBody;
  return typeof value === 'string' ? value : undefined;
}

/** The id of the record a DELETE names, from the query or the body; required. */
export function idFromQueryOrBody(name: string, query: Record<string, unknown>, body: Record<string, unknown> | undefined): string {
  const id = fromQueryOrBody(name, query, body);
  if (id === undefined) {
    throw errors.invalidRequest(`${name} is required, in the query or in the body.`, [
      { path: `/query/${name}`, message: `must have required property '${name}'` },
    ]);
  }
  return id;
}
