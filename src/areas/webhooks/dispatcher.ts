import { randomUUID } from 'node:crypto';
import type { Database } from '../../platform/db';
import { AddressNotAllowed, type Outbound, UrlNotAllowed } from '../../platform/net/outbound';
import type { Secrets } from '../../platform/secrets';
import { whileUnreachable } from '../../platform/reconnect';
import { WorkerPool } from '../../platform/workers';
import * as repo from './repository';
import { signatureHeader, signingSecretContext } from './signing';

export interface DeliverySettings {
  timeoutMs: number;
  /** Delays before the second, third… attempt; one attempt more than delays in all. */
  retryScheduleMs: readonly number[];
  disableAfterMs: number;
  pollIntervalMs: number;
  concurrency: number;
  retentionMs: number;
}

/** What a WebhookDispatcher is built from. */
export interface WebhookDispatcherDeps {
  db: Database;
  secrets: Secrets;
  /** The outbound guard every attempt goes through (and subscriptions' URLs are checked with). */
  outbound: Outbound;
  settings: DeliverySettings;
  log?: (level: 'info' | 'warn' | 'error', message: string, meta: Record<string, unknown>) => void;
  /** Told of every attempt recorded (for the metrics). */
  onAttempt?: (outcome: 'succeeded' | 'failed') => void;
}

/** How much of a receiver's answer the delivery log keeps. */
export const KEPT_RESPONSE_CHARS = 1024;
/** Retry-After values beyond this are cut to it. */
const MAX_RETRY_AFTER_MS = 24 * 3_600_000;
const JITTER = 0.1;
const PRUNE_EVERY_MS = 3_600_000;
const PRUNE_BATCH = 1000;
const USER_AGENT = 'ai-workspace-webhooks/1.0';

/** A claimed attempt: the delivery row's claim and the lease token that proves it. */
export interface Claim {
  claimed: repo.Claimed;
  token: string;
}

interface Outcome {
  succeeded: boolean;
  status: number | null;
  body: string | null;
  latencyMs: number | null;
  error: string | null;
  retryAfterMs: number | null;
}

/** The delay a `Retry-After` header asks for (seconds or an HTTP date), or null. */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | null {
  if (typeof value !== 'string' || value.trim() === '') return null;
  const ms = /^\d+$/.test(value.trim()) ? Number(value.trim()) * 1000 : Date.parse(value) - now;
  return Number.isFinite(ms) && ms > 0 ? Math.min(ms, MAX_RETRY_AFTER_MS) : null;
}

/** Text Postgres can store (no NUL characters), cut to the kept length. */
function keepText(text: string): string {
  return text.replace(/\u0000/g, '').slice(0, KEPT_RESPONSE_CHARS);
}

/**
 * The delivery workers of one instance: claim due deliveries (`FOR UPDATE SKIP LOCKED`, so any
 * number of instances share the work), make one signed attempt each, record it, and schedule the
 * next attempt or finish the delivery. A receiver's failure is an expected outcome, recorded in
 * the log, never an error of the service.
 */
export class WebhookDispatcher {
  private readonly pool: WorkerPool<Claim>;
  private lastPrune = 0;
  private readonly db: Database;
  private readonly secrets: Secrets;
  readonly outbound: Outbound;
  readonly settings: DeliverySettings;
  private readonly log: NonNullable<WebhookDispatcherDeps['log']>;
  private readonly onAttempt: NonNullable<WebhookDispatcherDeps['onAttempt']>;

  constructor({ db, secrets, outbound, settings, log = () => undefined, onAttempt = () => undefined }: WebhookDispatcherDeps) {
    this.db = db;
    this.secrets = secrets;
    this.outbound = outbound;
    this.settings = settings;
    this.log = log;
    this.onAttempt = onAttempt;
    this.pool = new WorkerPool({
      capacity: settings.concurrency,
      intervalMs: settings.pollIntervalMs,
      claim: async (limit) => {
        await this.pruneWhenDue();
        return this.claim(limit);
      },
      work: (claim) => this.attempt(claim),
      renew: {
        everyMs: this.leaseMs / 4,
        lease: ({ claimed, token }) => repo.renewLease(this.db, claimed.id, token, new Date(Date.now() + this.leaseMs)),
      },
      onError: (error, claim) =>
        // A claimed delivery left unrecorded is tried again when its lease ends.
        this.log('error', claim ? 'webhook attempt could not be recorded' : 'webhook delivery pass failed', {
          deliveryId: claim?.claimed.id,
          error: (error as Error).message,
        }),
    });
  }

  /** How long an attempt holds its delivery unless renewed (every quarter of it, while it goes on): the request's timeout and time to record it. */
  get leaseMs(): number {
    return this.settings.timeoutMs + 5000;
  }

  start(): void {
    this.pool.start();
  }

  /** Stops claiming and waits for the attempts in flight. */
  stop(): Promise<void> {
    return this.pool.stop();
  }

  /** Attempts this instance has made. */
  get attemptsMade(): number {
    return this.pool.completed;
  }

  /** Makes the attempts due now (up to the concurrency) and waits for them; resolves with how many it started. */
  async runOnce(): Promise<number> {
    const started = await this.pool.fill();
    await this.pool.idle();
    return started;
  }

  private async pruneWhenDue(): Promise<void> {
    if (Date.now() - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = Date.now();
    await this.prune();
  }

  /** Claims up to `limit` due deliveries for this instance. */
  async claim(limit: number): Promise<Claim[]> {
    const token = randomUUID();
    const now = Date.now();
    const claimed = await repo.claimDue(this.db, new Date(now), new Date(now + this.leaseMs), token, limit);
    return claimed.map((row) => ({ claimed: row, token }));
  }

  /**
   * Makes one attempt of a claimed delivery and records it. An attempt whose instance stopped
   * before recording it is logged first as interrupted (it may have reached the receiver, which
   * drops the repeat by its `webhook-id`).
   */
  async attempt({ claimed, token }: Claim): Promise<void> {
    const number = claimed.attempt_count;
    if (claimed.previous_lease_token !== null) {
      const interrupted: Outcome = {
        succeeded: false,
        status: null,
        body: null,
        latencyMs: null,
        error: 'interrupted: the instance making this attempt stopped before recording its answer',
        retryAfterMs: null,
      };
      if (number - 1 >= claimed.max_attempts) {
        await this.record({ claimed, token }, number - 1, new Date(Date.now()), interrupted);
        return;
      }
      await repo.insertAttempt(this.db, this.attemptRow(claimed.id, number - 1, new Date(Date.now()), interrupted));
    }
    const context = await repo.sendingContext(this.db, claimed.id);
    if (!context) return; // the subscription was deleted meanwhile
    const attemptedAt = new Date(Date.now());
    const outcome = await this.send(context, attemptedAt.getTime());
    // An answer is recorded once the database can be reached again (within the lease, renewed
    // meanwhile), rather than left to the lease's end and sent a second time.
    await whileUnreachable(() => this.record({ claimed, token }, number, attemptedAt, outcome), { forMs: this.leaseMs });
  }

  private async send(context: NonNullable<Awaited<ReturnType<typeof repo.sendingContext>>>, nowMs: number): Promise<Outcome> {
    const failed = (error: string): Outcome => ({ succeeded: false, status: null, body: null, latencyMs: null, error, retryAfterMs: null });
    const sealed = [context.secret];
    if (context.previous_secret && context.previous_secret_expires_at && context.previous_secret_expires_at.getTime() > nowMs) {
      sealed.push(context.previous_secret);
    }
    let secrets: string[];
    try {
      secrets = sealed.map((secret) => this.secrets.open(secret, signingSecretContext(context.subscription_id)));
    } catch (error) {
      this.log('error', 'a webhook signing secret cannot be read: every instance needs the same SECRETS_KEY list', {
        eventId: context.event_id,
        subscriptionId: context.subscription_id,
        reason: (error as Error).message,
      });
      return failed("the signing secret cannot be read with this deployment's keys (was SECRETS_KEY changed?); rotate the secret");
    }
    const timestamp = Math.floor(nowMs / 1000);
    const headers = {
      'user-agent': USER_AGENT,
      'webhook-id': context.event_id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(secrets, context.event_id, timestamp, context.body),
    };
    try {
      const answer = await this.outbound.request(
        context.url,
        { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: context.body },
        { timeoutMs: this.settings.timeoutMs, maxBytes: KEPT_RESPONSE_CHARS * 4 },
      );
      const succeeded = answer.status >= 200 && answer.status < 300;
      const redirect = answer.status >= 300 && answer.status < 400;
      return {
        succeeded,
        status: answer.status,
        body: keepText(answer.body.toString('utf8')),
        latencyMs: answer.latencyMs,
        error: redirect ? `redirects are not followed (Location: ${String(answer.headers.location ?? '')})`.slice(0, 500) : null,
        retryAfterMs: succeeded ? null : retryAfterMs(answer.headers['retry-after'], Date.now()),
      };
    } catch (error) {
      if (error instanceof AddressNotAllowed) return failed(`address not allowed: ${error.message}`);
      if (error instanceof UrlNotAllowed) return failed(`URL not allowed: ${error.message}`);
      return failed((error as Error).message || String(error));
    }
  }

  private attemptRow(deliveryId: string, attempt: number, at: Date, outcome: Outcome) {
    return {
      delivery_id: deliveryId,
      attempt,
      attempted_at: at,
      outcome: outcome.succeeded ? 'succeeded' : 'failed',
      response_status: outcome.status,
      response_body: outcome.body,
      latency_ms: outcome.latencyMs,
      error: outcome.error,
    };
  }

  /** Records an attempt, moves the delivery on, and updates its subscription's health. */
  private async record({ claimed, token }: Claim, attempt: number, attemptedAt: Date, outcome: Outcome): Promise<void> {
    const now = new Date(Date.now());
    const gone = outcome.status === 410;
    const final = outcome.succeeded || gone || attempt >= claimed.max_attempts;
    const delay = final ? 0 : this.retryDelay(attempt, outcome.retryAfterMs);
    if (outcome.succeeded && !claimed.is_test) {
      await repo.recordSuccess(
        this.db,
        { id: claimed.id, token, subscriptionId: claimed.subscription_id },
        this.attemptRow(claimed.id, attempt, attemptedAt, outcome),
        now,
      );
      this.onAttempt('succeeded');
      return;
    }
    const disabled = await this.db.transaction().execute(async (trx) => {
      const held = await repo.releaseDelivery(trx, claimed.id, token, {
        status: outcome.succeeded ? 'succeeded' : final ? 'failed' : 'pending',
        attempt_count: attempt,
        next_attempt_at: new Date(now.getTime() + delay),
        completed_at: final ? now : null,
        updated_at: now,
      });
      if (!held) return null; // the lease ran out and another instance took the delivery over
      await repo.insertAttempt(trx, this.attemptRow(claimed.id, attempt, attemptedAt, outcome));
      if (claimed.is_test) return null;
      if (outcome.succeeded) {
        await repo.clearFailing(trx, claimed.subscription_id);
        return null;
      }
      const subscription = await repo.markFailing(trx, claimed.subscription_id, attemptedAt);
      if (!subscription?.enabled) return null;
      const failingTooLong = (subscription.failing_since?.getTime() ?? now.getTime()) <= now.getTime() - this.settings.disableAfterMs;
      if (!gone && !failingTooLong) return null;
      const reason = gone ? 'endpoint_gone' : 'persistent_failure';
      await repo.updateSubscriptionById(trx, claimed.subscription_id, {
        enabled: false,
        disabled_reason: reason,
        disabled_at: now,
        updated_at: now,
      });
      return reason;
    });
    this.onAttempt(outcome.succeeded ? 'succeeded' : 'failed');
    if (disabled) {
      this.log('warn', 'webhook subscription disabled', { subscriptionId: claimed.subscription_id, reason: disabled });
    }
  }

  /** The delay after failed attempt `attempt`: the schedule's, with jitter, or Retry-After's if later. */
  private retryDelay(attempt: number, retryAfter: number | null): number {
    const schedule = this.settings.retryScheduleMs;
    const base = schedule[Math.min(attempt - 1, schedule.length - 1)] ?? 0;
    const jittered = Math.round(base * (1 + JITTER * Math.random()));
    return Math.max(jittered, retryAfter ?? 0);
  }

  /** Deletes the log of deliveries finished longer ago than the retention period. */
  async prune(): Promise<number> {
    const cutoff = new Date(Date.now() - this.settings.retentionMs);
    let total = 0;
    for (;;) {
      const deleted = await repo.pruneBefore(this.db, cutoff, PRUNE_BATCH);
      total += deleted;
      if (deleted < PRUNE_BATCH) return total;
    }
  }
}
