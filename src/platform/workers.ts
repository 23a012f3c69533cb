/**
 * A pool of background workers fed by claims from the database: every `intervalMs`, and as soon as
 * half its slots are free, it claims as many jobs as it has free slots and starts them, without
 * waiting for the jobs already running, so one slow job never holds the others back.
 */
export interface WorkerPoolOptions<T> {
  /** Jobs running at once in this instance. */
  capacity: number;
  intervalMs: number;
  /** Claims up to `limit` jobs (an empty list when there is nothing to do). */
  claim: (limit: number) => Promise<T[]>;
  /** Does one job; a rejection is reported through `onError`. */
  work: (job: T) => Promise<void>;
  onError: (error: unknown, job: T | null) => void;
  /**
   * Extends a running job's claim every `everyMs` until the job ends, so that a job slowed down by
   * a busy machine keeps its claim instead of being claimed and run a second time. A failed
   * renewal is left alone: the claim then runs out, and the job's end checks that it still holds it.
   */
  renew?: { everyMs: number; lease: (job: T) => Promise<unknown> };
}

export class WorkerPool<T> {
  private timer: NodeJS.Timeout | null = null;
  private claiming: Promise<number> | null = null;
  private readonly running = new Set<Promise<void>>();
  private stopping = false;
  private finished = 0;

  constructor(private readonly options: WorkerPoolOptions<T>) {}

  /** Jobs this pool has finished (successfully or not) since it was made. */
  get completed(): number {
    return this.finished;
  }

  start(): void {
    if (this.timer) return;
    this.stopping = false;
    this.timer = setInterval(() => void this.fill(), this.options.intervalMs);
    this.timer.unref();
  }

  /** Stops claiming and waits for the running jobs. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.claiming;
    await this.idle();
  }

  /** Claims and starts what fits now; resolves with the number of jobs started. */
  fill(): Promise<number> {
    // Cleared once settled: a pass that awaits nothing must not clear it before it is set.
    this.claiming ??= this.claimAndStart().finally(() => {
      this.claiming = null;
    });
    return this.claiming;
  }

  /** Resolves when no job is running (jobs started meanwhile included). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  private async claimAndStart(): Promise<number> {
    let started = 0;
    try {
      while (!this.stopping) {
        const free = this.options.capacity - this.running.size;
        if (free <= 0) break;
        const jobs = await this.options.claim(free);
        for (const job of jobs) {
          const renew = this.options.renew;
          const renewal = renew ? setInterval(() => void renew.lease(job).catch(() => undefined), renew.everyMs) : null;
          renewal?.unref();
          const run: Promise<void> = this.options
            .work(job)
            .catch((error: unknown) => this.options.onError(error, job))
            .finally(() => {
              if (renewal) clearInterval(renewal);
              this.finished += 1;
              this.running.delete(run);
              // Half the slots free: claim the next jobs now (in batches, not one claim per job).
              if (!this.stopping && this.running.size <= this.options.capacity / 2) void this.fill();
            });
          this.running.add(run);
        }
        started += jobs.length;
        if (jobs.length < free) break;
      }
    } catch (error) {
      this.options.onError(error, null);
    }
    return started;
  }
}

/**
 * A task that runs at start and then every `intervalMs` in the background, never two passes at
 * once (a pass still running when the next is due is not doubled). A failing pass is reported
 * through `onError` and the next one runs as usual.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly intervalMs: number,
    private readonly task: () => Promise<unknown>,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs);
    this.timer.unref();
    void this.runOnce();
  }

  /** Stops the timer and waits for a pass in progress. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** Runs a pass now (or waits for the one in progress). */
  runOnce(): Promise<void> {
    this.running ??= this.task()
      .then(() => undefined, this.onError)
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }
}
