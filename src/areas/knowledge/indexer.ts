import type { KnowledgeService } from './service';

/** Batches of records one pass embeds at most, so that shutdown never waits for a long backlog. */
const BATCHES_PER_PASS = 16;

/** Timers, injectable so that tests drive the indexer's schedule. */
export interface IndexerTimers {
  setTimeout(run: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: IndexerTimers = {
  setTimeout: (run, ms) => setTimeout(run, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** What a KnowledgeIndexer is built from. */
export interface KnowledgeIndexerDeps {
  knowledge: Pick<KnowledgeService, 'vectorAvailable' | 'indexPending' | 'deleteOrphans'>;
  intervalMs: number;
  onError: (error: unknown, retryInMs: number, failures: number) => void;
  maxBackoffMs?: number;
  timers?: IndexerTimers;
}

/**
 * Runs `indexPending` every `intervalMs` (and orphan clean-up now and then) until stopped. Work not
 * done before a restart is found again by the next run: nothing is queued in memory. While passes
 * fail, the wait doubles from `intervalMs` up to `maxBackoffMs`; a pass that succeeds resets it.
 */
export class KnowledgeIndexer {
  private timer: unknown = null;
  private started = false;
  private running: Promise<void> | null = null;
  private lastCleanup = 0;
  private failures = 0;

  private readonly knowledge: KnowledgeIndexerDeps['knowledge'];
  private readonly intervalMs: number;
  private readonly onError: (error: unknown, retryInMs: number, failures: number) => void;
  private readonly maxBackoffMs: number;
  private readonly timers: IndexerTimers;

  constructor({ knowledge, intervalMs, onError, maxBackoffMs = Math.max(intervalMs, 300_000), timers = realTimers }: KnowledgeIndexerDeps) {
    this.knowledge = knowledge;
    this.intervalMs = intervalMs;
    this.onError = onError;
    this.maxBackoffMs = maxBackoffMs;
    this.timers = timers;
  }

  /** Consecutive failed passes, and the wait before the next pass. */
  get status(): { consecutiveFailures: number; nextDelayMs: number } {
    return { consecutiveFailures: this.failures, nextDelayMs: this.nextDelay() };
  }

  private nextDelay(): number {
    if (this.failures === 0) return this.intervalMs;
    return Math.min(this.intervalMs * 2 ** Math.min(this.failures, 30), Math.max(this.maxBackoffMs, this.intervalMs));
  }

  start(): void {
    if (!this.knowledge.vectorAvailable || this.started) return;
    this.started = true;
    this.schedule();
  }

  private schedule(): void {
    if (!this.started) return;
    this.timer = this.timers.setTimeout(() => {
      this.timer = null;
      void this.runOnce().then(() => this.schedule());
    }, this.nextDelay());
  }

  /** One pass (also what tests call to wait for the index). */
  runOnce(): Promise<void> {
    this.running ??= (async () => {
      try {
        // A bounded pass: the next one continues the backlog.
        await this.knowledge.indexPending(BATCHES_PER_PASS);
        this.failures = 0;
        if (Date.now() - this.lastCleanup > 60_000) {
          this.lastCleanup = Date.now();
          await this.knowledge.deleteOrphans();
        }
      } catch (error) {
        this.failures += 1;
        this.onError(error, this.nextDelay(), this.failures);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  async stop(): Promise<void> {
    this.started = false;
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }
}
