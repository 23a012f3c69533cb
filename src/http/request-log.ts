import { randomUUID } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import type { Logger } from '../platform/logger';
import type { Metrics } from '../platform/metrics';
import { operationIdOf } from './openapi';

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._-]{1,100}$/;

/**
 * Gives every request an id (the client's `X-Request-Id` when it is sensible) and logs one line per
 * request when it ends: id, operationId, user, status, latency (also counted in the metrics).
 * Bodies, queries and headers are never logged, so neither are tokens.
 */
export function requestLog(logger: Logger, metrics: Metrics): RequestHandler {
  // One listener function for every response (not a closure per request).
  function finished(this: Response): void {
    const req = this.req;
    const latencyMs = performance.now() - req.receivedAt;
    const operationId = operationIdOf(req);
    logger.info('request', {
      requestId: req.requestId,
      operationId,
      userId: req.caller?.userId,
      method: req.method,
      path: req.path,
      status: this.statusCode,
      latencyMs,
    });
    // Operations by name; anything else (health, docs, unknown paths) as one label, to bound cardinality.
    metrics.requestAnswered(operationId ?? 'other', req.method, this.statusCode, latencyMs / 1000);
  }
  return (req, res, next) => {
    req.receivedAt = performance.now();
    const incoming = req.headers['x-request-id'];
    req.requestId = typeof incoming === 'string' && CLIENT_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', req.requestId);
    res.on('finish', finished);
    next();
  };
}
