import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { isConnectionFailure, PgError, pgErrorCode } from '../platform/db';
import type { Logger } from '../platform/logger';
import { StorageUnavailableError } from '../platform/storage';
import { ApiError, AUTHENTICATION_REQUIRED, bodyNotJson, type ErrorDetail, errors } from '../platform/errors';
import { errorBody, errorShapeOf } from './error-shape';
import { bodyPending } from './server';

interface LibraryError {
  status?: number;
  statusCode?: number;
  type?: string;
  message?: string;
  errors?: Array<{ path?: string; message?: string }>;
  headers?: Record<string, string>;
}

/** `.body.name` or `/body/name` → `/body/name`. */
function detailPath(path: string | undefined): string {
  if (!path) return '/';
  return path.startsWith('/') ? path : `/${path.replace(/^\./, '').replace(/\./g, '/')}`;
}

/** Ajv's "must match exactly one schema in oneOf" on a body whose oneOf is one of some fields, said with their names. */
function oneOfMessage(item: { path?: string; message?: string }, fields: string[] | undefined): string | undefined {
  if (!fields || detailPath(item.path) !== '/body' || item.message !== 'must match exactly one schema in oneOf') return undefined;
  return `must have exactly one of ${fields.join(' and ')}`;
}

/** Turns any thrown value into the catalogue's ApiError (null: an unexpected error, a 500). */
export function toApiError(
  error: unknown,
  bodyLimitBytes: number,
  authFailure?: string,
  invalidToken?: boolean,
  exactlyOneOf?: string[],
): ApiError | null {
  if (error instanceof ApiError) return error;
  if (error instanceof StorageUnavailableError) return errors.storageUnavailable();
  if (isConnectionFailure(error)) return errors.databaseUnavailable();
  const e = (error ?? {}) as LibraryError;
  const status = e.status ?? e.statusCode;
  if (e.type === 'entity.too.large' || status === 413)
    return errors.payloadTooLarge(`The request body is larger than ${bodyLimitBytes} bytes.`);
  if (e.type === 'entity.parse.failed') {
    return errors.invalidRequest('The request body is not valid JSON.', [{ path: '/body', message: 'must be valid JSON' }]);
  }
  switch (status) {
    case 400: {
      const details: ErrorDetail[] = (e.errors ?? []).map((item) => ({
        path: detailPath(item.path),
        message: oneOfMessage(item, exactlyOneOf) ?? item.message ?? 'is not valid',
      }));
      return errors.invalidRequest('The request is not valid.', details);
    }
    case 415:
      return bodyNotJson();
    case 401:
      return errors.unauthenticated(authFailure ?? AUTHENTICATION_REQUIRED, invalidToken);
    case 403:
      return errors.forbidden();
    case 404:
      return errors.notFound('No such route.');
    case 405:
      return errors.methodNotAllowed(e.headers?.Allow ?? '');
    default:
      break;
  }
  const code = pgErrorCode(error);
  if (code === PgError.uniqueViolation || code === PgError.foreignKeyViolation) {
    return errors.conflict('The request conflicts with a concurrent change; try again.');
  }
  return null;
}

export interface ErrorRenderingOptions {
  bodyLimitBytes: number;
  /**
   * Whether an error status the request's operation does not declare is itself an error (tests):
   * errors answered before the validator runs (authentication, rate limit, role guard, capability
   * gate, body size) never reach its response validation, so they are checked here.
   */
  requireDeclaredStatus: boolean;
  /**
   * Auth-params added to a 401's `WWW-Authenticate` challenge for this request, or undefined: the
   * protected-resource metadata of `/mcp` (RFC 9728 `resource_metadata`), so a client finds where
   * to sign in.
   */
  challengeOf?: (req: Request) => string | undefined;
}

/**
 * Renders every error as the ErrorResponse body, or OpenAI's under `/v1` (`errorShapeOf`). A 500
 * says only `internal_error` and the request id.
 */
export function errorMiddleware(
  logger: Logger,
  { bodyLimitBytes, requireDeclaredStatus, challengeOf }: ErrorRenderingOptions,
): ErrorRequestHandler {
  return (error, req, res, next) => {
    if (res.headersSent) {
      // A streamed answer had started: it can only be cut short (Express closes the connection).
      logger.error('error after the response started', { requestId: req.requestId, error: (error as Error)?.message });
      return next(error);
    }
    let apiError =
      toApiError(error, bodyLimitBytes, req.authFailure, req.invalidToken, req.operation?.exactlyOneOf) ?? errors.internal(req.requestId);
    const statuses = req.operation?.statuses;
    if (requireDeclaredStatus && statuses && !statuses.has(String(apiError.status)) && !statuses.has('default')) {
      logger.error('error status not declared by the operation', {
        requestId: req.requestId,
        operationId: req.operation?.operationId,
        status: apiError.status,
        code: apiError.code,
      });
      apiError = errors.internal(req.requestId);
    }
    // An expected outcome (a provider failed, a dependency is down), reported where it happened or
    // here without a stack: a database or file store that cannot be reached answers 503.
    const unavailable = apiError.code === 'database_unavailable' || apiError.code === 'storage_unavailable';
    if ((error instanceof ApiError || unavailable) && apiError.status >= 500) {
      logger.warn('request failed', { requestId: req.requestId, code: apiError.code, error: (error as Error)?.message });
    } else if (apiError.status >= 500) {
      const e = error as Error & { errors?: unknown };
      logger.error('unhandled error', {
        requestId: req.requestId,
        error: e?.message,
        details: e?.errors,
        stack: e?.stack,
      });
    }
    // A body not (fully) received is not waited for or drained: the connection closes after the answer.
    if (bodyPending(req)) res.set('Connection', 'close');
    const extra = apiError.status === 401 ? challengeOf?.(req) : undefined;
    const headers =
      extra && apiError.headers['WWW-Authenticate']
        ? { ...apiError.headers, 'WWW-Authenticate': `${apiError.headers['WWW-Authenticate']}, ${extra}` }
        : apiError.headers;
    res
      .status(apiError.status)
      .set(headers)
      .json(errorBody(apiError, errorShapeOf(req.path)));
  };
}

/** Any path the service does not serve (in /api/v1 or outside it). */
export const apiNotFound: RequestHandler = (_req, _res, next) => next(errors.notFound('No such route.'));
