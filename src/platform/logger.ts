import winston from 'winston';

// Field names whose values are never logged: credentials of every kind (`apiKey`, `x-api-key`,
// `credentials`, `accessToken`, `clientSecret`, `privateKey`…), wherever they sit in an entry.
const SECRET_KEY = /authorization|cookie|token|secret|password|passphrase|signature|api[-_]?key|credential|private[-_]?key/i;
const REDACTED = '[redacted]';

function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    out[key] = SECRET_KEY.test(key) ? REDACTED : redact(item, depth + 1);
  }
  return out;
}

/** Removes values of secret-looking keys (tokens, cookies, secrets) wherever they sit in a log entry. */
export const redactSecrets = winston.format((info) => {
  for (const key of Object.keys(info)) {
    if (SECRET_KEY.test(key)) info[key] = REDACTED;
    else info[key] = redact(info[key]);
  }
  return info;
});

export type Logger = winston.Logger;

export function createLogger(level: 'error' | 'warn' | 'info' | 'debug' | 'silent'): Logger {
  return winston.createLogger({
    level: level === 'silent' ? 'error' : level,
    silent: level === 'silent',
    format: winston.format.combine(redactSecrets(), winston.format.timestamp(), winston.format.json()),
    defaultMeta: { service: 'ai-workspace-service' },
    transports: [new winston.transports.Console()],
  });
}

/** One request's access-log entry. */
export interface AccessEntry {
  requestId: string;
  operationId: string | undefined;
  userId: string | undefined;
  method: string;
  path: string;
  status: number;
  latencyMs: number;
}

/** Writes one request's access-log line (see `accessLog`). */
export type AccessLog = (entry: AccessEntry) => void;

/** The last four characters of an ISO timestamp for each millisecond: `000Z` to `999Z`. */
const MILLIS = Array.from({ length: 1000 }, (_, ms) => `${String(ms).padStart(3, '0')}Z`);

/** The most operationIds whose encoded field `accessLog` keeps. */
const MAX_OPERATION_FIELDS = 1000;

/**
 * The one line per request, written beside winston rather than through its stream pipeline (which
 * cost about a sixth of a small request): the JSON fields winston's format would write, buffered
 * and written to stdout once per turn of the event loop, and nothing at all below the `info`
 * level (as the logger is at the turn's first line). The line is assembled from its fixed fields
 * (each string JSON-encoded, the operationId's field once per operation), with the timestamp's
 * date and time formatted once per second: an object spread, `JSON.stringify` and a date
 * formatted per request cost a tenth of a small request. Its fields hold no secrets (no query
 * string, headers or bodies), so it is not redacted.
 */
export function accessLog(logger: Logger, out: { write(chunk: string): unknown } = process.stdout): AccessLog {
  const service = JSON.stringify((logger.defaultMeta as { service?: string } | undefined)?.service);
  let pending = '';
  const flush = () => {
    const lines = pending;
    pending = '';
    out.write(lines);
  };
  const operationFields = new Map<string, string>();
  const operationField = (operationId: string): string => {
    let field = operationFields.get(operationId);
    if (field === undefined) {
      field = `,"operationId":${JSON.stringify(operationId)}`;
      if (operationFields.size < MAX_OPERATION_FIELDS) operationFields.set(operationId, field);
    }
    return field;
  };
  let stampedAt = Number.NaN;
  let stamp = '';
  let second = Number.NaN;
  let secondPrefix = '';
  return (entry) => {
    // Whether lines are written is decided at the first line of a turn, for all the turn's lines
    // (winston walks its transports to decide it): a change of level counts from the next turn.
    if (pending === '') {
      if (logger.silent || !logger.isLevelEnabled('info')) return;
      setImmediate(flush);
    }
    const now = Date.now();
    if (now !== stampedAt) {
      stampedAt = now;
      // toISOString's text: the date and time up to the second formatted once per second.
      const millis = now % 1000;
      if (now - millis !== second) {
        second = now - millis;
        secondPrefix = new Date(second).toISOString().slice(0, -4);
      }
      stamp = secondPrefix + (MILLIS[millis] as string);
    }
    const operationId = entry.operationId === undefined ? '' : operationField(entry.operationId);
    const userId = entry.userId === undefined ? '' : `,"userId":${JSON.stringify(entry.userId)}`;
    pending +=
      `{"level":"info","message":"request","requestId":${JSON.stringify(entry.requestId)}${operationId}${userId}` +
      `,"method":${JSON.stringify(entry.method)},"path":${JSON.stringify(entry.path)},"status":${entry.status}` +
      `,"latencyMs":${entry.latencyMs},"service":${service},"timestamp":"${stamp}"}\n`;
  };
}
