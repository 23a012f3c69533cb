import http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Express } from 'express';
import type { HttpLimits } from '../config';
import { type ApiError, errors } from './errors';

/** Node's request and response constructors, called on an object whose prototype is chosen here. */
type NodeConstructor<A extends unknown[]> = (this: object, ...args: A) => void;

/** Node's constructor as a plain function, or an error at start-up if this Node made it a class. */
function callable<A extends unknown[]>(constructor: unknown, name: string): NodeConstructor<A> {
  if (typeof constructor !== 'function' || Function.prototype.toString.call(constructor).startsWith('class')) {
    throw new Error(`node:http's ${name} is not a plain function on this Node (${process.version}): src/http/server.ts must construct it another way`);
  }
  return constructor as NodeConstructor<A>;
}

/**
 * Requests and responses are constructed with Express's prototypes for `app` (`app.request`,
 * `app.response`) and with every field that Express, the router, cookie-parser, the validator
 * and the service's own middleware set on them on the way to a handler.
 *
 * Prototypes: Express gives every request and response the app's prototypes with
 * `Object.setPrototypeOf` as it starts handling them. On Node 20's V8 an object whose prototype is
 * changed that way keeps what it references alive through young-generation collections, to be
 * copied by each and promoted to the old generation: a bare node:http server that sets the
 * prototypes per request promotes 1.3 MB per collection instead of 0.3 KB and answers half as
 * many requests (38,000 → 20,000 req/s here). Constructed with the same prototypes, the call
 * changes nothing (V8 returns at once when the prototype is already the one given) and the
 * objects die young (README "Performance").
 *
 * Fields: V8 gives an object room in itself for the properties its constructor sets; the ones
 * added later (a plain IncomingMessage is given about sixteen) each change its shape and go to a
 * separate property array that is copied into a larger one as it fills. Declared here, the fields
 * are written in place and every request keeps one shape.
 * `query` is not among them: Express reads it through a getter, which the validator replaces with
 * the validated values; an own field would hide both.
 */
function constructors(app: Express): Pick<http.ServerOptions, 'IncomingMessage' | 'ServerResponse'> {
  const incomingMessage = callable<[Socket]>(http.IncomingMessage, 'IncomingMessage');
  const serverResponse = callable<[http.IncomingMessage, unknown]>(http.ServerResponse, 'ServerResponse');

  function ServiceRequest(this: Record<string, unknown>, socket: Socket): void {
    incomingMessage.call(this, socket);
    // Express and the router
    this.res = undefined;
    this.next = undefined;
    this.baseUrl = undefined;
    this.originalUrl = undefined;
    this.params = undefined;
    this.route = undefined;
    this.body = undefined;
    // parseurl's caches
    this._parsedUrl = undefined;
    this._parsedOriginalUrl = undefined;
    // cookie-parser
    this.secret = undefined;
    this.cookies = undefined;
    this.signedCookies = undefined;
    // express-openapi-validator
    this.openapi = undefined;
    // the service (src/http/types.ts)
    this.requestId = undefined;
    this.receivedAt = undefined;
    this.credentials = undefined;
    this.authFailure = undefined;
    this.invalidToken = undefined;
    this.caller = undefined;
  }
  ServiceRequest.prototype = app.request;

  function ServiceResponse(this: Record<string, unknown>, req: http.IncomingMessage, options: unknown): void {
    serverResponse.call(this, req, options);
    // Express
    this.locals = undefined;
  }
  ServiceResponse.prototype = app.response;

  return {
    IncomingMessage: ServiceRequest as unknown as typeof http.IncomingMessage,
    ServerResponse: ServiceResponse as unknown as typeof http.ServerResponse,
  };
}

/**
 * Whether the request has a body (RFC 9112: Content-Length or Transfer-Encoding) not yet fully
 * received. (`complete` alone is false for every request while Node emits it, body or not.)
 */
export function bodyPending(req: http.IncomingMessage): boolean {
  const { 'content-length': length, 'transfer-encoding': encoding } = req.headers;
  return (encoding !== undefined || (length !== undefined && length !== '0')) && !req.complete;
}

/** An error answer written straight to a connection that has no usable request (Node's `clientError`). */
function rawAnswer(error: ApiError): string {
  const body = JSON.stringify(error.body());
  const head = [
    `HTTP/1.1 ${error.status} ${http.STATUS_CODES[error.status] ?? ''}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Cache-Control: no-store',
    'X-Content-Type-Options: nosniff',
    'Connection: close',
  ];
  return `${head.join('\r\n')}\r\n\r\n${body}`;
}

/**
 * What Node would answer a malformed or timed-out request with a bare status line, as the
 * ErrorResponse body instead: 431 for headers over Node's size limit, 413 for oversized chunk
 * extensions, 408 for a connection that did not send its headers within the headers timeout, and
 * 400 for the rest (a control character in a header, a malformed request line).
 */
function answerClientError(error: Error & { code?: string; reason?: string }, socket: Duplex): void {
  const inProgress = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (error.code === 'ECONNRESET' || !socket.writable || inProgress?.headersSent) {
    socket.destroy();
    return;
  }
  let answer: ApiError;
  if (error.code === 'HPE_HEADER_OVERFLOW') answer = errors.headersTooLarge();
  else if (error.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') answer = errors.payloadTooLarge('The chunk extensions are too large.');
  else if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') answer = errors.requestTimeout();
  else answer = errors.invalidRequest(`The request is not valid HTTP${error.reason ? ` (${error.reason})` : ''}.`);
  socket.end(rawAnswer(answer), () => socket.destroy());
}

/**
 * Cuts a request body that arrives too slowly, without a total time limit that a large upload
 * would hit: the body has `bodyTimeoutMs` of credit, spent in real time and earned back at a
 * second per `bodyMinBytesPerSecond` bytes received (never more than `bodyTimeoutMs` ahead). A
 * client trickling bytes, or stalling, runs out; one sending at least that rate never does. Time
 * in which the service is not reading (bytes wait in the request's buffer: authentication, a
 * slow store) is not the client's and renews the credit. Out of credit, the request is answered
 * `408 request_timeout` (if nothing was answered yet) and its connection closed. The socket's
 * byte count is read only when the credit would run out: no listener on the body.
 */
function limitBodyRate(req: http.IncomingMessage, res: http.ServerResponse, limits: HttpLimits): void {
  if (!bodyPending(req)) return;
  const socket = req.socket;
  let counted = socket.bytesRead;
  let deadline = performance.now() + limits.bodyTimeoutMs;
  const check = () => {
    if (req.complete || socket.destroyed) return;
    const now = performance.now();
    deadline += ((socket.bytesRead - counted) / limits.bodyMinBytesPerSecond) * 1000;
    counted = socket.bytesRead;
    if (req.readableLength > 0) deadline = Math.max(deadline, now + limits.bodyTimeoutMs);
    deadline = Math.min(deadline, now + limits.bodyTimeoutMs);
    if (deadline > now) {
      timer = setTimeout(check, deadline - now);
      return;
    }
    if (res.headersSent) {
      socket.destroy();
      return;
    }
    const answer = errors.requestTimeout();
    const body = JSON.stringify(answer.body());
    res.shouldKeepAlive = false;
    res.writeHead(answer.status, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      'Cache-Control': 'no-store',
      Connection: 'close',
    });
    res.end(body, () => socket.destroy());
  };
  let timer = setTimeout(check, limits.bodyTimeoutMs);
  res.once('close', () => clearTimeout(timer));
}

/**
 * The service's HTTP server for `app`, not yet listening. With `limits`: the headers timeout
 * (which also closes a connection that sends nothing), the keep-alive timeout, a cap on open
 * connections and the body-rate rule; Node's total request timeout only if configured, since it
 * would cut long uploads.
 */
export function createHttpServer(app: Express, limits?: HttpLimits): http.Server {
  const timeouts: http.ServerOptions = limits
    ? {
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        // How often Node checks the two timeouts above (30 s by default: a timeout could run 30 s over).
        connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
      }
    : {};
  const server = http.createServer({ ...constructors(app), ...timeouts }, app);
  server.on('clientError', answerClientError);
  if (limits) {
    server.keepAliveTimeout = limits.keepAliveTimeoutMs;
    if (limits.maxConnections > 0) server.maxConnections = limits.maxConnections;
    server.prependListener('request', (req, res) => limitBodyRate(req, res, limits));
  }
  return server;
}
