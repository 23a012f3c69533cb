import { timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** What a scrape reads from the database and the pool, at the moment of the scrape. */
export interface QueueProbe {
  pendingDeliveries(): Promise<number>;
  queuedRuns(): Promise<number>;
  pool(): { total: number; idle: number; waiting: number } | null;
}

/** A gauge whose value is read at each scrape. */
function scrapedGauge(registry: Registry, name: string, help: string, read: () => Promise<number>): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    async collect() {
      this.set(await read());
    },
  });
}

/**
 * The service's Prometheus metrics: requests by operation and status with latency, the webhook
 * and automation queues, delivery and run outcomes, exchanges with MCP servers, the database pool,
 * and the process.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'http_requests_total',
    help: 'Requests answered, by operation and status.',
    labelNames: ['operation', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time to answer a request, by operation.',
    labelNames: ['operation'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly shedRequests = new Counter({
    name: 'http_requests_shed_total',
    help: 'Requests refused with 503 overloaded by load shedding, by reason (in_flight, event_loop_delay).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly deliveryAttempts = new Counter({
    name: 'webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts made by this instance, by outcome.',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly runsFinished = new Counter({
    name: 'automation_runs_finished_total',
    help: 'Automation runs ended by this instance, by status.',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  readonly groundedTurns = new Counter({
    name: 'chat_grounded_turns_total',
    help: "Chat turns grounded in the caller's knowledge, by outcome (grounded: sources given; empty: none matched; failed: the search failed).",
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly groundingSources = new Counter({
    name: 'chat_grounding_sources_total',
    help: 'Knowledge sources given to grounded chat turns.',
    registers: [this.registry],
  });
  readonly toolCalls = new Counter({
    name: 'chat_tool_calls_total',
    help: 'Tool calls of chat turns run or answered by this instance, by tool and outcome (success, error, timeout, denied, not_found).',
    labelNames: ['tool', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly approvalWait = new Histogram({
    name: 'chat_tool_approval_wait_seconds',
    help: 'Time from a tool call approval request to its decision, by decision.',
    labelNames: ['decision'] as const,
    buckets: [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 14400, 86400],
    registers: [this.registry],
  });
  readonly firstToken = new Histogram({
    name: 'chat_model_first_token_seconds',
    help: 'Time from a streamed model call to its first text or tool call.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly mcpCalls = new Histogram({
    name: 'mcp_call_duration_seconds',
    help: 'Exchanges of this instance with MCP servers (a catalog read or a tool call, connecting included), by operation and outcome.',
    labelNames: ['operation', 'outcome'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly mcpErrors = new Counter({
    name: 'mcp_call_errors_total',
    help: 'Exchanges of this instance with MCP servers that failed, by operation and outcome (timeout, unreachable, http_error, not_allowed, too_large, protocol, tool_error, cancelled).',
    labelNames: ['operation', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly integrationRefreshes = new Counter({
    name: 'integration_token_refreshes_total',
    help: 'Refreshes of integration access tokens by this instance, by outcome (success; refused: the user must connect again; unavailable: the provider could not be reached).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  constructor(probe: QueueProbe) {
    collectDefaultMetrics({ register: this.registry });
    scrapedGauge(this.registry, 'webhook_deliveries_pending', 'Webhook deliveries waiting for an attempt (all instances).', () =>
      probe.pendingDeliveries(),
    );
    scrapedGauge(this.registry, 'automation_runs_queued', 'Automation runs waiting to start (all instances).', () => probe.queuedRuns());
    new Gauge({
      name: 'db_pool_connections',
      help: 'Database pool connections of this instance, by state (Postgres only).',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const pool = probe.pool();
        if (!pool) return;
        this.set({ state: 'total' }, pool.total);
        this.set({ state: 'idle' }, pool.idle);
        this.set({ state: 'waiting' }, pool.waiting);
      },
    });
  }

  /** Counts an answered request in `requests` and its latency in `latency`. */
  requestAnswered(operation: string, method: string, status: number, seconds: number): void {
    this.requests.inc({ operation, method, status: String(status) });
    this.latency.observe({ operation }, seconds);
  }

  /**
   * `GET /metrics` in the Prometheus text format, only for requests bearing `token`: the route
   * does not exist (404) when no token is configured.
   */
  handler(token: string | null): RequestHandler {
    const expected = token ? Buffer.from(`Bearer ${token}`) : null;
    return async (req, res, next) => {
      if (!expected) return next();
      const given = Buffer.from(req.get('authorization') ?? '');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        res.status(401).set('WWW-Authenticate', 'Bearer').json({ error: 'A metrics token is required.', code: 'unauthenticated' });
        return;
      }
      res.set('Content-Type', this.registry.contentType).send(await this.registry.metrics());
    };
  }
}
