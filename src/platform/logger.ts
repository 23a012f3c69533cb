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
