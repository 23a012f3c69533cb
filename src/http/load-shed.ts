import type http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { RequestHandler } from 'express';
import { errors } from '../platform/errors';
import type { Metrics } from '../platform/metrics';
import { errorBody, errorShapeOf } from './error-shape';

/** When the instance refuses new requests (the configuration's `http.loadShed`); 0 turns a rule off. */
export interface LoadShedLimits {
  /** Requests being answered at most (streams that have opened no longer count). */
  maxInFlight: number;
  /** The event loop's delay (p99 over the last window, in ms) above which new requests are refused. */
  maxEventLoopDelayMs: number;
}

/** Paths that answer whatever the load: an orchestrator's probes and the metrics scrape. */
const ALWAYS_ANSWERED = new Set(['/healthz', '/readyz', '/metrics']);
/** How long one reading of the event loop's delay stands before the next one is taken. */
const WINDOW_MS = 500;
/** The histogram's sampling interval: finer costs a timer wake-up more often for no better decision. */
const RESOLUTION_MS = 10;

const releases = new WeakMap<http.ServerResponse, () => void>();

/**
 * Takes a streaming answer out of the in-flight count once its stream has opened: a reply that
 * streams for a minute waits on its model, not on this instance.
 */
export function leaveInFlight(res: http.ServerResponse): void {
  releases.get(res)?.();
}

/**
 * Load shedding in front of the routes: past `maxInFlight` requests in progress, or while the
 * event loop runs more than `maxEventLoopDelayMs` late (Node's own histogram, read every half
 * second), a new request is answered at once `503 overloaded` with `Retry-After: 1` instead of
 * joining a queue that would make every answer late. Health, readiness and metrics are always
 * answered. Refusals are counted in the metrics (and logged as every answer is).
 */
export class LoadShedder {
  private inFlight = 0;
  private readonly histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  private delayMs = 0;
  /** When the histogram was last read; none before the first request (start-up's work does not count). */
  private readAt: number | null = null;

  constructor(
    private readonly limits: LoadShedLimits,
    private readonly metrics: Metrics,
  ) {
    if (limits.maxEventLoopDelayMs > 0) this.histogram.enable();
  }

  /** The event loop's delay as last read (p99 of the window before, in ms). */
  private eventLoopDelayMs(): number {
    const now = performance.now();
    if (this.readAt === null) {
      this.histogram.reset();
      this.readAt = now;
    } else if (now - this.readAt >= WINDOW_MS) {
      this.delayMs = this.histogram.count > 0 ? this.histogram.percentile(99) / 1e6 : 0;
      this.histogram.reset();
      this.readAt = now;
    }
    return this.delayMs;
  }

  private refusal(): 'in_flight' | 'event_loop_delay' | null {
    const { maxInFlight, maxEventLoopDelayMs } = this.limits;
    if (maxInFlight > 0 && this.inFlight >= maxInFlight) return 'in_flight';
    if (maxEventLoopDelayMs > 0 && this.eventLoopDelayMs() > maxEventLoopDelayMs) return 'event_loop_delay';
    return null;
  }

  readonly middleware: RequestHandler = (req, res, next) => {
    if (ALWAYS_ANSWERED.has(req.path)) return next();
    const reason = this.refusal();
    if (reason !== null) {
      this.metrics.shedRequests.inc({ reason });
      const answer = errors.overloaded();
      res
        .status(answer.status)
        .set(answer.headers)
        .json(errorBody(answer, errorShapeOf(req.originalUrl)));
      return;
    }
    this.inFlight += 1;
    let counted = true;
    // A pipelined request's response waits for the one before it on the connection; if the
    // connection closes first, some Node releases (20's server) never close that response: the
    // socket's close releases it too.
    const socket = req.socket;
    const release = () => {
      if (!counted) return;
      counted = false;
      this.inFlight -= 1;
      releases.delete(res);
      socket.off('close', release);
    };
    releases.set(res, release);
    res.once('close', release);
    socket.once('close', release);
    next();
  };

  close(): void {
    this.histogram.disable();
  }
}
