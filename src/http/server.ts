import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Express } from 'express';
import { type ApiError, errors } from '../platform/errors';
import { errorBody, errorShapeOf } from './error-shape';

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
function answerClientError(
  error: Error & { code?: string; reason?: string },
  socket: Duplex,
  answering: WeakMap<Duplex, http.ServerResponse>,
): void {
  if (error.code === 'ECONNRESET' || !socket.writable || answering.get(socket)?.headersSent) {
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

/** The server's limits on slow and idle clients (the configuration's `http`). */
export interface HttpLimits {
  /** Time a connection has to send a request's headers (also how long a connection may sit idle before its first request). */
  headersTimeoutMs: number;
  /** Node's limit on receiving a whole request; 0 (the default) leaves bodies to the body-rate rule, so long uploads are not cut. */
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection is kept between requests. */
  keepAliveTimeoutMs: number;
  /** Time a request body may take before it must keep up `bodyMinBytesPerSecond`. */
  bodyTimeoutMs: number;
  /** Each this many bytes received extends the body's time by a second (a slow-body client is cut, a large upload is not). */
  bodyMinBytesPerSecond: number;
  /** Open connections at most (more are refused); 0 is no limit. */
  maxConnections: number;
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
    const body = JSON.stringify(errorBody(answer, errorShapeOf(req.url ?? '')));
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
  const server = http.createServer(timeouts, app);
  // The response in progress on each connection: an error on a connection whose answer has begun
  // can only close it (its own answer would land inside the other's).
  const answering = new WeakMap<Duplex, http.ServerResponse>();
  server.prependListener('request', (req, res) => {
    answering.set(req.socket, res);
    res.once('close', () => {
      if (answering.get(req.socket) === res) answering.delete(req.socket);
    });
  });
  server.on('clientError', (error: Error & { code?: string; reason?: string }, socket: Duplex) =>
    answerClientError(error, socket, answering),
  );
  if (limits) {
    server.keepAliveTimeout = limits.keepAliveTimeoutMs;
    if (limits.maxConnections > 0) server.maxConnections = limits.maxConnections;
    server.prependListener('request', (req, res) => limitBodyRate(req, res, limits));
  }
  return server;
}
