import type { ApiError, ErrorDetail } from '../platform/errors';

/**
 * The two error bodies the service answers with: its own `ErrorResponse` (`{ error, code, …extras }`)
 * everywhere, and OpenAI's (`{ error: { message, type, param, code } }`, the document's
 * `OpenAIErrorResponse`) on the OpenAI-compatible API under `/v1`, whose clients read only that.
 * Every error answer (the error middleware's, a stream's error event, a timed-out body's) is
 * rendered here.
 */
export type ErrorShape = 'service' | 'openai';

/** `/v1` and what is under it: OpenAI's URL space (`/api/v1` is the service's own). */
const OPENAI_PATH = /^\/v1(?:[/?#]|$)/;

/** The shape of the errors of a request to `url` (a path, with or without its query). */
export const errorShapeOf = (url: string): ErrorShape => (OPENAI_PATH.test(url) ? 'openai' : 'service');

/** OpenAI's error `type`, by status (its clients tell errors apart by status and type). */
function openAiType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 402) return 'insufficient_quota';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/**
 * A detail's path as OpenAI's `param` names a field: `/body/messages/0/content` is
 * `messages[0].content`, `/query/limit` is `limit`; the body as a whole or a header is none.
 */
export function openAiParam(path: string): string | null {
  const [, where, ...segments] = path.split('/');
  if ((where !== 'body' && where !== 'query') || segments.length === 0 || segments[0] === '') return null;
  return segments.reduce(
    (param, segment) => (/^\d+$/.test(segment) ? `${param}[${segment}]` : param ? `${param}.${segment}` : segment),
    '',
  );
}

/** The message with each problem of `details` said after it, by the field it names. */
function withDetails(message: string, details: ErrorDetail[]): string {
  if (details.length === 0) return message;
  const problems = details.map((d) => `${openAiParam(d.path) ?? (d.path === '/body' ? 'body' : d.path)}: ${d.message}`);
  return `${message.replace(/\.$/, '')}: ${problems.join('; ')}.`;
}

/** The body of `error` in `shape`. */
export function errorBody(error: ApiError, shape: ErrorShape): Record<string, unknown> {
  if (shape === 'service') return error.body();
  const details = Array.isArray(error.extras.details) ? (error.extras.details as ErrorDetail[]) : [];
  return {
    error: {
      message: withDetails(error.message, details),
      type: openAiType(error.status),
      param: details[0] ? openAiParam(details[0].path) : null,
      code: error.code,
    },
  };
}
