import { randomUUID } from 'node:crypto';
import cron, { type ScheduledTask } from 'node-cron';
import { ApiError } from '../../platform/errors';
import type { Database } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import { whileUnreachable } from '../../platform/reconnect';
import { WorkerPool } from '../../platform/workers';
import type { BudgetGate } from '../billing/service';
import type { CapabilityService } from '../capabilities/service';
import type { OutputService } from '../outputs/service';
import { costMicroCents, presentUsage } from '../../platform/usage';
import type { WebhookService } from '../webhooks/service';
import * as repo from './repository';
import { latestSlot, nextSlots } from './schedule';
import { type AutomationService, modelRefused, RunFailure } from './service';

export interface RunnerSettings {
  tickCron: string;
  pollIntervalMs: number;
  runTimeoutMs: number;
  maxConcurrentRunsPerUser: number;
}

/** How a run this instance executed ended. */
type FinishedStatus = Exclude<repo.RunStatus, 'queued' | 'running'>;

type Log = (level: 'info' | 'warn' | 'error', message: string, meta: Record<string, unknown>) => void;

/** Starts of a run after which an instance stopping during it fails the run instead. */
const MAX_ATTEMPTS = 3;
const DUE_BATCH = 500;
/** Runs in progress at once in one instance (each user's limit applies across instances). */
const RUNS_PER_INSTANCE = 8;

/** What an AutomationScheduler is built from. */
export interface AutomationSchedulerDeps {
  db: Database;
  capabilities: CapabilityService;
  tickCron: string;
  log: Log;
  onQueued?: () => void;
}

/**
 * The scheduler of one instance: node-cron ticks, and each tick claims the due slots of enabled
 * schedules by inserting their runs, 500 schedules per transaction (locked with SKIP LOCKED, so
 * instances ticking together split them). The unique (automation, slot) key makes every slot run
 * once however many instances tick; after downtime only the latest missed slot runs.
 */
export class AutomationScheduler {
  private task: ScheduledTask | null = null;

  private readonly db: Database;
  private readonly capabilities: CapabilityService;
  private readonly tickCron: string;
  private readonly log: Log;
  private readonly onQueued: () => void;

  constructor({ db, capabilities, tickCron, log, onQueued = () => undefined }: AutomationSchedulerDeps) {
    this.db = db;
    this.capabilities = capabilities;
    this.tickCron = tickCron;
    this.log = log;
    this.onQueued = onQueued;
  }

  start(): void {
    if (this.task) return;
    // A late or skipped tick is harmless: a tick queues every slot due by its time, once (the
    // unique (automation, slot) key), so the next tick catches up. node-cron would print a warning
    // with a stack for each tick that a busy event loop delays or that overlaps a running one;
    // those are handled here instead and its own messages go to the service's log.
    this.task = cron.createTask(
      this.tickCron,
      () => this.tick().catch((error: unknown) => this.log('error', 'automation scheduling failed', { error: (error as Error).message })),
      {
        noOverlap: true,
        logger: {
          info: () => undefined,
          debug: () => undefined,
          warn: () => undefined,
          error: (message, error) => this.log('error', 'automation scheduler failed', { error: String(error ?? message) }),
        },
      },
    );
    this.task.on('execution:missed', () => undefined);
    void this.task.start();
  }

  async stop(): Promise<void> {
    await this.task?.destroy();
    this.task = null;
  }

  /**
   * Queues the runs of the slots due at `now`, a batch per transaction until none is left;
   * resolves with how many this instance queued.
   */
  async tick(now: Date = new Date()): Promise<number> {
    if (!(await this.capabilities.isEnabled('automations'))) return 0;
    let queued = 0;
    for (;;) {
      const batch = await this.db.transaction().execute(async (trx) => {
        const due = await repo.lockDueAutomations(trx, now, DUE_BATCH);
        if (due.length === 0) return { due: 0, queued: 0 };
        const slots = due.map((automation) => {
          const { cron: expression, timezone } = automation as { cron: string; timezone: string };
          return { automation, slot: latestSlot(expression, timezone, now), next: nextSlots(expression, timezone, now, 1)[0] as Date };
        });
        const inserted = await repo.insertScheduledRuns(
          trx,
          slots.map(({ automation, slot }) => ({
            id: uuidv7(now.getTime()),
            automation_id: automation.id,
            owner_user_id: automation.owner_user_id,
            status: 'queued',
            trigger: 'schedule',
            scheduled_for: slot,
            created_at: now,
          })),
        );
        // Every claimed schedule's next slot is after `now`: the next pass does not see it again.
        await repo.advanceNextRuns(
          trx,
          slots.map(({ automation, next }) => ({ id: automation.id, at: next })),
        );
        return { due: due.length, queued: inserted };
      });
      queued += batch.queued;
      if (batch.due < DUE_BATCH) break;
    }
    if (queued > 0) this.onQueued();
    return queued;
  }
}

/** What an AutomationRunner is built from. */
export interface AutomationRunnerDeps {
  db: Database;
  automations: AutomationService;
  outputs: OutputService;
  webhooks: WebhookService;
  capabilities: CapabilityService;
  billing: BudgetGate;
  settings: RunnerSettings;
  log: Log;
  /** Told of every run this instance ends (for the metrics). */
  onFinished?: (status: FinishedStatus) => void;
}

/**
 * The run workers of one instance: claim queued runs (and runs whose instance stopped, after
 * their lease), execute them under the run timeout, store the output, record usage and emit
 * `automation.finished` or `automation.failed` with the run's final state.
 */
export class AutomationRunner {
  private readonly pool: WorkerPool<{ run: repo.RunRow; token: string }>;

  private readonly db: Database;
  private readonly automations: AutomationService;
  private readonly outputs: OutputService;
  private readonly webhooks: WebhookService;
  private readonly capabilities: CapabilityService;
  private readonly billing: BudgetGate;
  private readonly settings: RunnerSettings;
  private readonly log: Log;
  private readonly onFinished: (status: FinishedStatus) => void;

  constructor({
    db,
    automations,
    outputs,
    webhooks,
    capabilities,
    billing,
    settings,
    log,
    onFinished = () => undefined,
  }: AutomationRunnerDeps) {
    this.db = db;
    this.automations = automations;
    this.outputs = outputs;
    this.webhooks = webhooks;
    this.capabilities = capabilities;
    this.billing = billing;
    this.settings = settings;
    this.log = log;
    this.onFinished = onFinished;
    this.pool = new WorkerPool({
      capacity: RUNS_PER_INSTANCE,
      intervalMs: settings.pollIntervalMs,
      claim: (limit) => this.claim(limit),
      work: ({ run, token }) => this.execute(run, token),
      renew: {
        everyMs: this.leaseMs / 4,
        lease: ({ run, token }) => repo.renewRunLease(this.db, run.id, token, new Date(Date.now() + this.leaseMs)),
      },
      onError: (error, job) =>
        // Left running: the run is taken over when its lease ends.
        this.log('error', job ? 'automation run could not be recorded' : 'automation run pass failed', {
          runId: job?.run.id,
          error: (error as Error).message,
        }),
    });
  }

  /**
   * How long a claim lasts unless renewed: the run timeout and a margin to record the outcome. The
   * pool renews it every quarter of that while the run goes on; it runs out only when the instance
   * running it stopped (or stalled for that long).
   */
  get leaseMs(): number {
    return this.settings.runTimeoutMs + Math.min(30_000, Math.max(5000, this.settings.runTimeoutMs));
  }

  start(): void {
    this.pool.start();
  }

  /** Stops claiming and waits for the runs in progress. */
  stop(): Promise<void> {
    return this.pool.stop();
  }

  /** Starts what can start now, without waiting for it. */
  wake(): void {
    void this.pool.fill();
  }

  /** Starts what can start now and waits for those runs; resolves with how many. */
  async runOnce(): Promise<number> {
    const started = await this.pool.fill();
    await this.pool.idle();
    return started;
  }

  private async claim(limit: number): Promise<{ run: repo.RunRow; token: string }[]> {
    const token: string = randomUUID();
    const now = new Date();
    const claimed = await this.db
      .transaction()
      .execute((trx) =>
        repo.claimRuns(trx, now, new Date(now.getTime() + this.leaseMs), token, limit, this.settings.maxConcurrentRunsPerUser),
      );
    return claimed.map((run) => ({ run, token }));
  }

  private async execute(run: repo.RunRow, token: string): Promise<void> {
    if (!(await this.capabilities.isEnabled('automations'))) {
      await this.end(run, token, 'cancelled', {
        code: 'capability_disabled',
        message: 'Automations were switched off before the run started.',
      });
      return;
    }
    if (run.attempt > MAX_ATTEMPTS) {
      await this.end(run, token, 'failed', { code: 'interrupted', message: `The instances running it stopped ${MAX_ATTEMPTS} times.` });
      return;
    }
    const automation = await repo.findAutomationById(this.db, run.automation_id);
    if (!automation) return; // deleted meanwhile, with its runs
    try {
      await this.automations.requireBudgetFor(automation.owner_user_id, automation.model).catch((error: unknown) => {
        if (error instanceof ApiError && error.code === 'budget_exhausted')
          throw new RunFailure('budget_exhausted', 'Nothing was left to spend in this period when the run started.');
        if (error instanceof ApiError && error.code === 'quota_exceeded') throw new RunFailure('quota_exceeded', error.message);
        throw modelRefused(error);
      });
      const generated = await this.automations.generate(
        automation.owner_user_id,
        this.automations.draftOf(automation),
        AbortSignal.timeout(this.settings.runTimeoutMs),
      );
      const extension = { markdown: 'md', text: 'txt', json: 'json' }[automation.output_format] ?? 'txt';
      const day = new Date().toISOString().slice(0, 10);
      // The run's output and end are stored once the database can be reached again (within the
      // run's lease, renewed meanwhile), instead of the run being taken over and generated again.
      const output = await this.untilStored(() =>
        this.outputs.create({
          ownerUserId: automation.owner_user_id,
          type: 'document',
          name: `${automation.name} ${day}.${extension}`,
          mimeType: generated.mimeType,
          body: Buffer.from(generated.content, 'utf8'),
          automationId: automation.id,
        }),
      );
      const cost = generated.connectionId === null ? costMicroCents(generated.model, generated.usage) : 0;
      const ended = await this.untilStored(() =>
        this.db.transaction().execute(async (trx) => {
          const now = new Date();
          const stored = await repo.finishRun(trx, run.id, token, {
            status: 'succeeded',
            finished_at: now,
            input_tokens: generated.usage.inputTokens,
            output_tokens: generated.usage.outputTokens,
            cost_micro_cents: cost,
            output_ids: [output.id],
          });
          // Not held any more: ended by an earlier try whose answer was lost (the run holds this
          // output, and its charge and event were written with it), or taken over by another instance.
          if (!stored) return (await repo.findRun(trx, automation.owner_user_id, run.id))?.output_ids?.includes(output.id) ?? false;
          await this.billing.charge(trx, {
            userId: automation.owner_user_id,
            kind: 'automation.run',
            resourceId: run.id,
            model: generated.model,
            connectionId: generated.connectionId,
            usage: generated.usage,
            at: now,
          });
          await this.webhooks.emitEvent(trx, 'automation.finished', automation.owner_user_id, {
            automationId: automation.id,
            runId: run.id,
            trigger: run.trigger as repo.RunTrigger,
            scheduledFor: run.scheduled_for?.getTime() ?? null,
            outputIds: [output.id],
            usage: presentUsage(generated.usage, cost),
          });
          return true;
        }),
      );
      if (ended) this.onFinished('succeeded');
      // Another instance took the run over (this one outlived its lease): its output is not this run's.
      else await this.outputs.delete(automation.owner_user_id, output.id).catch(() => undefined);
    } catch (error) {
      if (!(error instanceof RunFailure)) throw error;
      await this.end(run, token, 'failed', { code: error.code, message: error.message });
    }
  }

  /** A write of a run's outcome, tried again while the database cannot be reached (for up to the run's lease). */
  private untilStored<T>(write: () => Promise<T>): Promise<T> {
    return whileUnreachable(write, { forMs: this.leaseMs });
  }

  /** Ends a run without output, emitting `automation.failed` for a failure. */
  private async end(run: repo.RunRow, token: string, status: 'failed' | 'cancelled', error: { code: string; message: string }) {
    const ended = await this.untilStored(() =>
      this.db.transaction().execute(async (trx) => {
        const stored = await repo.finishRun(trx, run.id, token, {
          status,
          finished_at: new Date(),
          error_code: error.code,
          error_message: error.message,
        });
        if (!stored || status !== 'failed') return !!stored;
        await this.webhooks.emitEvent(trx, 'automation.failed', run.owner_user_id, {
          automationId: run.automation_id,
          runId: run.id,
          trigger: run.trigger as repo.RunTrigger,
          scheduledFor: run.scheduled_for?.getTime() ?? null,
          errorCode: error.code,
          error: error.message,
        });
        return true;
      }),
    );
    if (ended) this.onFinished(status);
  }
}
