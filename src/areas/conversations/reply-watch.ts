import type { Database } from '../../platform/db';
import type { Notifications } from '../../platform/db/notifications';
import { errors } from '../../platform/errors';
import type { ReplyLeases } from './leases';
import { presentApproval, presentMessage } from './presenter';
import * as stream from './repository';
import { ReplyStreamWriter } from './reply-stream';

/** A stream event as `watchReply` sends it. */
export interface WatchedEvent {
  id: number;
  event: string;
  data: unknown;
}

const FINAL = new Set(['done', 'error', 'approval-required', 'stopped']);
/** How often a watcher reads again when no notification came (a missed one, or none sent). */
const POLL_MS = 1000;
/** How long an ended reply's final event may take to be stored before a watcher sends one of its own. */
const SETTLE_MS = 3000;
/** How long `stop` waits for the reply to end. */
const STOP_WAIT_MS = 5000;
const PAGE = 200;

export interface ReplyWatchDeps {
  db: Database;
  notifications: Notifications;
  leases: Pick<ReplyLeases, 'stopHere' | 'stopLapsed'>;
  log: (message: string, meta: Record<string, unknown>) => void;
}

/**
 * Replies' streams across instances: the writers of the streamed ones, their watchers (stored
 * events, then live ones, woken by `NOTIFY`), and stopping a reply from any instance.
 */
export class ReplyWatch {
  private readonly db: Database;
  private readonly notifications: Notifications;
  private readonly leases: Pick<ReplyLeases, 'stopHere' | 'stopLapsed'>;
  private readonly log: ReplyWatchDeps['log'];
  private readonly waiting = new Map<string, Set<() => void>>();

  constructor({ db, notifications, leases, log }: ReplyWatchDeps) {
    this.db = db;
    this.notifications = notifications;
    this.leases = leases;
    this.log = log;
  }

  /** Listens for stop requests and new events (called once as the instance starts). */
  async start(): Promise<void> {
    await this.notifications.listen(stream.STOP_CHANNEL, (id) => this.leases.stopHere(id));
    await this.notifications.listen(stream.EVENTS_CHANNEL, (id) => this.wake(id));
    this.notifications.onReconnect(() => {
      for (const id of this.waiting.keys()) this.wake(id);
    });
  }

  /** The writer of a streamed reply's events. */
  writer(replyId: string): ReplyStreamWriter {
    return new ReplyStreamWriter(this.db, replyId, (error) =>
      this.log('storing reply stream events failed', { messageId: replyId, error: error.message }),
    );
  }

  /** The caller's reply, or 404. */
  async reply(userId: string, messageId: string) {
    const reply = await stream.findOwnedReply(this.db, userId, messageId, SETTLE_MS);
    if (!reply) throw errors.notFound('Reply not found.');
    return reply;
  }

  /**
   * The reply's events after `after`: stored, then live, to its final event; none when the client
   * has that already. Ends early when `signal` aborts.
   */
  async *follow(userId: string, messageId: string, after: number, signal: AbortSignal): AsyncGenerator<WatchedEvent> {
    const last = await stream.lastEvent(this.db, messageId);
    if (last && FINAL.has(last.event) && last.seq <= after) return;
    let sent = after;
    while (!signal.aborted) {
      const woken = this.next(messageId, signal);
      try {
        const rows = await stream.eventsAfter(this.db, messageId, sent, PAGE);
        for (const row of rows) {
          yield { id: row.seq, event: row.event, data: sliced(row, sent) };
          sent = row.seq;
          if (FINAL.has(row.event)) return;
        }
        if (rows.length === PAGE) continue;
        const reply = await stream.findOwnedReply(this.db, userId, messageId, SETTLE_MS);
        if (!reply) return;
        if (reply.status !== 'generating' && (reply.settled || !last)) {
          // Its final event was never stored, or was removed: one made from the reply as stored.
          const final = await this.finalOf(reply);
          yield { id: Math.max(sent, last?.seq ?? 0) + 1, ...final };
          return;
        }
        await woken.wait(POLL_MS);
      } finally {
        woken.forget();
      }
    }
  }

  /** Asks for the caller's reply to stop and waits (bounded) until it ended; returns it as it is then. */
  async stop(userId: string, messageId: string) {
    const asked = await stream.requestStop(this.db, userId, messageId);
    if (!asked) {
      await this.reply(userId, messageId);
      throw errors.conflict('The reply is not being generated: only a generating reply can be stopped.');
    }
    this.leases.stopHere(messageId);
    const until = Date.now() + STOP_WAIT_MS;
    const signal = new AbortController().signal;
    for (;;) {
      const woken = this.next(messageId, signal);
      try {
        // Its instance gone (the lease ran out): ended here.
        await this.leases.stopLapsed([messageId]);
        const reply = await this.reply(userId, messageId);
        if (reply.status !== 'generating' || Date.now() >= until) return reply;
        await woken.wait(Math.min(250, until - Date.now()));
      } finally {
        woken.forget();
      }
    }
  }

  /** Removes the stored events of replies that ended more than `graceMs` ago. */
  async removeEnded(graceMs: number): Promise<void> {
    while ((await stream.removeEndedEvents(this.db, graceMs, 1000)) === 1000);
  }

  private async finalOf(reply: Awaited<ReturnType<typeof stream.findOwnedReply>> & object) {
    const message = presentMessage(reply);
    if (reply.status === 'complete') return { event: 'done', data: { message } };
    if (reply.status === 'stopped') return { event: 'stopped', data: { message } };
    if (reply.status === 'awaiting_approval') {
      const approval = await stream.pendingApprovalOf(this.db, reply.id);
      if (approval) return { event: 'approval-required', data: { approval: presentApproval(approval), message } };
    }
    return { event: 'error', data: { error: reply.error_message ?? 'The reply failed.', code: reply.error_code ?? 'failed', message } };
  }

  private wake(id: string): void {
    for (const resolve of this.waiting.get(id) ?? []) resolve();
  }

  /** A wait that ends at the next notification for `id` (from now), after `ms`, or when `signal` aborts. */
  private next(id: string, signal: AbortSignal): { wait(ms: number): Promise<void>; forget(): void } {
    let notified = false;
    let done: (() => void) | null = null;
    const resolve = () => {
      notified = true;
      done?.();
    };
    const set = this.waiting.get(id) ?? new Set();
    set.add(resolve);
    this.waiting.set(id, set);
    const forget = () => {
      set.delete(resolve);
      if (set.size === 0 && this.waiting.get(id) === set) this.waiting.delete(id);
    };
    return {
      forget,
      wait: (ms) =>
        new Promise<void>((finish) => {
          const end = () => {
            clearTimeout(timer);
            signal.removeEventListener('abort', end);
            forget();
            finish();
          };
          const timer = setTimeout(end, Math.max(0, ms));
          if (notified || signal.aborted) return end();
          done = end;
          signal.addEventListener('abort', end);
        }),
    };
  }
}

/** A stored event as sent after `after`: a delta row that holds events up to it sends only the text after them. */
function sliced(row: stream.StoredEventRow, after: number): unknown {
  if (row.event !== 'delta') return row.data;
  const { text, pieces } = row.data as { text: string; pieces?: number[] };
  if (!pieces || row.first_seq > after) return { text };
  const skip = pieces.slice(0, after - row.first_seq + 1).reduce((sum, n) => sum + n, 0);
  return { text: text.slice(skip) };
}
