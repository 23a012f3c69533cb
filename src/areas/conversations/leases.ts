import type { Transaction } from 'kysely';
import type { Database, DB } from '../../platform/db';
import { presentUsage } from '../../platform/usage';
import type { WebhookService } from '../webhooks/service';
import { presentCitations, presentMessage } from './presenter';
import * as repo from './repository';

/** How a reply's instance holds it while generating it (see `ReplyLeases.recoverInterrupted`). */
export interface ReplyLeaseSettings {
  /** How long a reply's lease lasts; renewed at a third of it while the reply is generated. */
  leaseMs: number;
}

export interface ReplyLeasesDeps {
  db: Database;
  webhooks: Pick<WebhookService, 'emitEvent'>;
  lease: ReplyLeaseSettings;
}

const INTERRUPTED = 'The instance writing the reply stopped before it ended.';
const INTERRUPT_BATCH = 100;

/**
 * The replies this instance is generating, held by their leases: renewed while they are, and the
 * replies whose instance stopped (or that a shutdown cannot wait for) failed as `interrupted`.
 */
export class ReplyLeases {
  private readonly db: Database;
  private readonly webhooks: Pick<WebhookService, 'emitEvent'>;
  /** How long a reply's lease lasts. */
  readonly leaseMs: number;
  /** The replies this instance is generating (their leases are renewed while they are), and their stops. */
  private readonly generating = new Map<string, AbortController>();
  /** The inserts of turns this instance has begun, until they are committed (or refused). */
  private readonly storing = new Set<Promise<unknown>>();

  constructor({ db, webhooks, lease }: ReplyLeasesDeps) {
    this.db = db;
    this.webhooks = webhooks;
    this.leaseMs = lease.leaseMs;
  }

  /** Counts `replyId` as this instance's, generating, until `release`; returns the signal that stops it. */
  hold(replyId: string): AbortSignal {
    const held = this.generating.get(replyId) ?? new AbortController();
    this.generating.set(replyId, held);
    return held.signal;
  }

  /** The signal that stops the reply this instance generates, or an unstoppable one if it does not hold it. */
  stopSignal(replyId: string): AbortSignal {
    return this.generating.get(replyId)?.signal ?? new AbortController().signal;
  }

  /** Stops the reply if this instance generates it (a stop asked for on any instance); whether it does. */
  stopHere(replyId: string): boolean {
    const held = this.generating.get(replyId);
    held?.abort(new Error('the reply was stopped'));
    return held !== undefined;
  }

  release(replyId: string): void {
    this.generating.delete(replyId);
  }

  /** A turn's insert, which `interruptGenerating` waits for until it settles. */
  storingTurn(insert: Promise<unknown>): void {
    this.storing.add(insert);
    insert.catch(() => undefined).finally(() => this.storing.delete(insert));
  }

  /** Extends the leases of the replies this instance is generating, and stops those asked to stop meanwhile. */
  async renewLeases(): Promise<void> {
    const stops = await repo.renewReplyLeases(this.db, [...this.generating.keys()], this.leaseMs);
    for (const id of stops) this.stopHere(id);
  }

  /**
   * Ends as `stopped` the replies asked to stop whose instance is gone (their lease ran out), or
   * with `ids` these of them, each with its `chat.completed` (`status: stopped`) and the final
   * event of its stream; resolves with the replies ended.
   */
  async stopLapsed(ids?: string[]): Promise<repo.MessageRow[]> {
    return this.db.transaction().execute(async (trx) => {
      const ended = await repo.stopLapsedReplies(trx, INTERRUPT_BATCH, ids);
      for (const reply of ended) {
        const usage = { inputTokens: reply.input_tokens ?? 0, outputTokens: reply.output_tokens ?? 0 };
        await this.webhooks.emitEvent(trx, 'chat.completed', reply.owner_user_id, {
          conversationId: reply.conversation_id,
          messageId: reply.id,
          model: reply.model ?? '',
          content: reply.content,
          usage: presentUsage(usage, Number(reply.cost_micro_cents ?? 0)),
          citations: presentCitations(reply.citations),
          status: 'stopped',
        });
        await repo.appendFinalEvent(trx, reply.id, 'stopped', { message: presentMessage(reply) });
      }
      return ended;
    });
  }

  /**
   * Fails as `interrupted` the replies whose instance stopped (their lease ran out, on the
   * database's clock) and emits their `chat.failed`, each in the transaction that ends it, so one
   * instance only reports each. The replies this instance is generating are alive whatever their
   * lease says (one that lapsed while the database was unreachable is renewed again). Resolves
   * with how many this instance ended.
   */
  async recoverInterrupted(now: Date = new Date()): Promise<number> {
    let ended = 0;
    for (;;) {
      const batch = await this.db.transaction().execute((trx) => this.interrupt(trx, now, { alive: [...this.generating.keys()] }));
      ended += batch;
      if (batch < INTERRUPT_BATCH) return ended;
    }
  }

  /**
   * Fails as `interrupted` the replies this instance is still generating (a shutdown that cannot
   * wait for them), with their `chat.failed`. Resolves with how many it ended.
   */
  async interruptGenerating(): Promise<number> {
    // A turn whose model call began while its rows were being stored is among them once they are.
    await Promise.allSettled([...this.storing]);
    const ids = [...this.generating.keys()];
    if (ids.length === 0) return 0;
    return this.db.transaction().execute((trx) => this.interrupt(trx, new Date(), { ids }));
  }

  private async interrupt(trx: Transaction<DB>, now: Date, target: { ids: string[] } | { alive: string[] }): Promise<number> {
    const ended = await repo.interruptReplies(trx, now, INTERRUPTED, INTERRUPT_BATCH, target);
    for (const reply of ended) {
      await this.webhooks.emitEvent(trx, 'chat.failed', reply.owner_user_id, {
        conversationId: reply.conversation_id,
        messageId: reply.id,
        model: reply.model,
        errorCode: 'interrupted',
        error: INTERRUPTED,
      });
      // Its watchers' streams end with it (see `ReplyWatch`).
      const message = presentMessage(reply);
      await repo.appendFinalEvent(trx, reply.id, 'error', { error: INTERRUPTED, code: 'interrupted', message });
    }
    return ended.length;
  }
}
