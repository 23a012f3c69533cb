import { PeriodicTask } from '../../platform/workers';
import type { ApprovalService } from './approvals';
import type { ReplyLeases } from './leases';
import type { ReplyWatch } from './reply-watch';

export interface ReplyRecoverySettings {
  /** How long a reply's lease lasts (renewed at a third of it while the reply is generated). */
  leaseMs: number;
  /** How often each instance looks for replies whose instance stopped. */
  sweepIntervalMs: number;
  /** How long a reply's stored stream events are kept after it ended. */
  eventsRetentionMs: number;
}

type Log = (level: 'info' | 'warn' | 'error', message: string, meta: Record<string, unknown>) => void;

/** What the recovery works through: the leases of the replies, and the approvals they wait on. */
export interface RecoveredChat {
  leases: Pick<ReplyLeases, 'renewLeases' | 'recoverInterrupted' | 'stopLapsed'>;
  approvals: Pick<ApprovalService, 'expireApprovals'>;
  watch: Pick<ReplyWatch, 'start' | 'removeEnded'>;
}

/**
 * The chat replies' background work in one instance: renews the leases of the replies it is
 * generating, and (at start and then periodically) fails as `interrupted`, with `chat.failed`, the
 * replies whose instance stopped before ending them, and ends the replies whose tool approval expired.
 */
export class ReplyRecovery {
  private readonly renewal: PeriodicTask;
  private readonly sweep: PeriodicTask;
  private listening: Promise<void> = Promise.resolve();

  constructor(
    private readonly chat: RecoveredChat,
    settings: ReplyRecoverySettings,
    private readonly log: Log,
  ) {
    const report = (message: string) => (error: unknown) => log('error', message, { error: (error as Error).message });
    this.renewal = new PeriodicTask(
      Math.max(1, Math.floor(settings.leaseMs / 3)),
      () => chat.leases.renewLeases(),
      report('chat reply lease renewal failed'),
    );
    this.sweep = new PeriodicTask(
      settings.sweepIntervalMs,
      async () => {
        // A reply asked to stop whose instance is gone ends stopped, not interrupted.
        const stopped = await chat.leases.stopLapsed();
        if (stopped.length > 0) log('info', 'ended as stopped chat replies whose instance stopped', { replies: stopped.length });
        const ended = await chat.leases.recoverInterrupted();
        if (ended > 0) log('warn', 'failed chat replies whose instance stopped', { replies: ended });
        const expired = await chat.approvals.expireApprovals();
        if (expired > 0) log('info', 'ended chat replies whose tool approval expired', { replies: expired });
        await chat.watch.removeEnded(settings.eventsRetentionMs);
      },
      report('chat reply recovery failed'),
    );
  }

  start(): void {
    this.listening = this.chat.watch
      .start()
      .catch((error: unknown) =>
        this.log('error', 'listening for chat reply stops and events failed', { error: (error as Error).message }),
      );
    this.renewal.start();
    this.sweep.start();
  }

  async stop(): Promise<void> {
    await this.listening;
    await Promise.all([this.renewal.stop(), this.sweep.stop()]);
  }

  /** Fails the replies whose lease ran out now, and those whose approval expired; resolves with how many. */
  async runOnce(): Promise<number> {
    const stopped = (await this.chat.leases.stopLapsed()).length;
    return stopped + (await this.chat.leases.recoverInterrupted()) + (await this.chat.approvals.expireApprovals());
  }
}
