import path from 'node:path';
import { z } from 'zod';
import { topic, variable } from './declare';
import { bool, int, list, oneOf, size, text, url } from './kinds';

/** The process: where it listens, what it keeps where, how it logs and stops. */
export const service = topic('Service', {
  env: variable('NODE_ENV', oneOf(['development', 'production', 'test']), {
    default: 'development',
    doc: '`production` requires an identity provider, `COOKIE_SECRET`, `SECRETS_KEY` and a model provider (the rules below)',
  }),
  port: variable('PORT', int(0, 65535), { default: '8080', doc: 'HTTP port' }),
  host: variable('HOST', text(), { default: '0.0.0.0', doc: 'listen address' }),
  dataDir: variable(
    'DATA_DIR',
    text().transform((dir) => path.resolve(dir)),
    {
      default: './.data',
      accepts: 'directory',
      doc: 'PGlite files, development keys, local objects',
    },
  ),
  databaseUrl: variable('DATABASE_URL', url(['postgres:', 'postgresql:']), {
    unset: null,
    doc: 'when unset the embedded PGlite in `DATA_DIR/pglite` is used (one instance only)',
  }),
  databasePoolSize: variable('DATABASE_POOL_SIZE', int(1, 200), { default: '10', doc: 'Postgres connections per instance' }),
  logLevel: variable('LOG_LEVEL', oneOf(['error', 'warn', 'info', 'debug', 'silent']), {
    default: 'info',
    doc: 'the least severe level logged',
  }),
  validateResponses: variable('VALIDATE_RESPONSES', bool(), {
    default: 'false',
    doc: 'validate every response against the document with express-openapi-validator too (requests are always validated; on in tests; slower start-up and requests)',
  }),
  metricsToken: variable('METRICS_TOKEN', text({ min: 16 }), {
    unset: null,
    doc: 'serve `GET /metrics` (Prometheus) to requests bearing this token; unset, it is not served',
  }),
  bootstrapAdminUserIds: variable(
    'BOOTSTRAP_ADMIN_USER_IDS',
    list(z.string().max(200, 'entries must be at most 200 characters'), 'comma-separated user ids of ≤ 200 characters'),
    { unset: [], doc: 'user ids granted `admin` at start-up (audited)' },
  ),
  shutdownDrainMs: variable('SHUTDOWN_DRAIN_MS', int(0, 600_000), {
    default: '5000',
    doc: 'on SIGTERM, how long the instance keeps serving with `/readyz` at `503 draining` (answers carry `Connection: close`) before it stops accepting; SIGINT or a second signal skips the rest',
  }),
  shutdownTimeoutMs: variable('SHUTDOWN_TIMEOUT_MS', int(0, 600_000), {
    default: '10000',
    doc: 'after the drain, how long in-flight requests and replies may take; then replies still streaming are failed as `interrupted` and the process exits',
  }),
});

/** The HTTP edge: bodies, proxies, slow and idle clients, and the rate limit. */
export const http = topic(
  'HTTP',
  {
    bodyLimitBytes: variable('BODY_LIMIT', size(), { default: '1mb', doc: 'largest JSON body (`413 payload_too_large` above)' }),
    trustProxy: variable('TRUST_PROXY', bool(), { default: 'false', doc: 'trust `X-Forwarded-*` (behind a load balancer)' }),
    http: {
      headersTimeoutMs: variable('HTTP_HEADERS_TIMEOUT_MS', int(1_000, 600_000), {
        default: '10000',
        doc: "time a connection has to send a request's headers (`408 request_timeout` after)",
      }),
      requestTimeoutMs: variable('HTTP_REQUEST_TIMEOUT_MS', int(0, 86_400_000), {
        default: '0',
        doc: "Node's limit on receiving a whole request; 0 leaves bodies to the body-rate rule so large uploads are not cut (if set, at least the headers timeout)",
      }),
      keepAliveTimeoutMs: variable('HTTP_KEEP_ALIVE_TIMEOUT_MS', int(0, 600_000), {
        default: '5000',
        doc: 'how long an idle keep-alive connection is kept (behind a load balancer, above its idle timeout)',
      }),
      bodyTimeoutMs: variable('HTTP_BODY_TIMEOUT_MS', int(100, 600_000), {
        default: '20000',
        doc: 'the credit a request body starts with',
      }),
      bodyMinBytesPerSecond: variable('HTTP_BODY_MIN_BYTES_PER_SECOND', int(1, 1_000_000_000), {
        default: '1024',
        doc: 'each this many bytes received earn back a second of credit (up to the timeout ahead): a body slower than this on average, or stalled longer than its credit, is cut with `408`. Time the service itself is not reading does not count',
      }),
      maxConnections: variable('HTTP_MAX_CONNECTIONS', int(0, 1_000_000), {
        default: '10000',
        doc: 'open connections at most (0: no limit)',
      }),
    },
    loadShed: {
      maxInFlight: variable('LOAD_SHED_MAX_IN_FLIGHT', int(0, 1_000_000), {
        default: '256',
        doc: 'requests in progress at most (an opened event stream no longer counts); more are answered at once `503 overloaded` with `Retry-After: 1`. `/healthz`, `/readyz` and `/metrics` always answer; `0`: no limit',
      }),
      maxEventLoopDelayMs: variable('LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS', int(0, 60_000), {
        default: '0',
        doc: 'while the event loop runs later than this (its p99 over the last half second), new requests are answered `503 overloaded` too; `0` (the default): off, since on a shared host the loop also runs late for reasons refusing requests does not cure',
      }),
    },
    rateLimitPerMinute: variable('RATE_LIMIT_PER_MINUTE', int(0, 1_000_000), {
      default: '600',
      doc: 'requests per user and minute, across instances (`429` above); `0` turns the limit off',
    }),
  },
  {
    'request-timeout-covers-headers': {
      variables: ['HTTP_REQUEST_TIMEOUT_MS', 'HTTP_HEADERS_TIMEOUT_MS'],
      requires: 'HTTP_REQUEST_TIMEOUT_MS must be 0 or at least HTTP_HEADERS_TIMEOUT_MS',
      broken: ({ http }) => http.requestTimeoutMs > 0 && http.requestTimeoutMs < http.headersTimeoutMs,
    },
  },
);
