import type { Transaction } from 'kysely';
import type { Database, DB } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import { whileUnreachable } from '../../platform/reconnect';
import { presentUsage } from '../../platform/usage';
import type { BudgetGate } from '../billing/service';
import type { WebhookService } from '../webhooks/service';
import { presentCitations } from './presenter';
import * as repo from './repository';
import {
  argumentsDigest,
  contentOf,
  type FailureCode,
  progress,
  type SendOutcome,
  type Step,
  stepResource,
  type ToolCallPart,
  type Turn,
} from './turn';

export interface ReplyWritesDeps {
  db: Database;
  billing: Pick<BudgetGate, 'charge'>;
  webhooks: Pick<WebhookService, 'emitEvent'>;
  /** How long the writes are tried again while the database cannot be reached: the reply's lease. */
  leaseMs: number;
  /** How long an approval waits for the user's decision. */
  approvalTtlMs: number;
}

/**
 * A turn's writes of its reply: each step that called tools (charged), the pause for an approval,
 * and the reply's end (complete or failed), each with its webhook event in the same transaction.
 */
export class ReplyWrites {
  private readonly db: Database;
  private readonly billing: Pick<BudgetGate, 'charge'>;
  private readonly webhooks: Pick<WebhookService, 'emitEvent'>;
  private readonly leaseMs: number;
  private readonly approvalTtlMs: number;

  constructor({ db, billing, webhooks, leaseMs, approvalTtlMs }: ReplyWritesDeps) {
    this.db = db;
    this.billing = billing;
    this.webhooks = webhooks;
    this.leaseMs = leaseMs;
    this.approvalTtlMs = approvalTtlMs;
  }

  /** Stores a step that called tools (parts and usage so far) and charges it. */
  async recordStep(turn: Turn, step: Step): Promise<void> {
    await this.write(async (trx) => {
      const now = new Date();
      const stored = await repo.updateGenerating(trx, turn.reply.id, { ...progress(turn), updated_at: now });
      // Ended meanwhile (interrupted after its lease, or its conversation deleted): nothing to charge to it.
      if (!stored) return;
      const { model } = turn;
      await this.billing.charge(trx, {
        userId: turn.userId,
        kind: 'chat.reply',
        resourceId: stepResource(turn, step.index),
        model: model.info,
        connectionId: model.connectionId,
        usage: step.usage,
        at: now,
        hold: turn.hold,
      });
    });
  }

  /** Pauses the turn for the user's decision on `call`: an approval, the reply `awaiting_approval`, `approval.requested`. */
  async pause(turn: Turn, call: ToolCallPart): Promise<SendOutcome> {
    return this.write(async (trx) => {
      const now = new Date();
      const approvalId = uuidv7(now.getTime());
      call.approvalId = approvalId;
      const reply = await repo.pauseReply(trx, turn.reply.id, { ...progress(turn), updated_at: now });
      if (!reply) {
        // Ended meanwhile (interrupted, or its conversation deleted): nothing waits.
        const ended = (await repo.findMessage(trx, turn.reply.id)) ?? turn.reply;
        return { message: turn.message, reply: ended, failure: null, approval: null };
      }
      const approval = await repo.insertApproval(trx, {
        id: approvalId,
        user_id: turn.userId,
        conversation_id: reply.conversation_id,
        message_id: reply.id,
        tool_call_id: call.toolCallId,
        tool_name: call.toolName,
        arguments: JSON.stringify(call.arguments),
        arguments_digest: argumentsDigest(call.arguments),
        status: 'pending',
        created_at: now,
        expires_at: new Date(now.getTime() + this.approvalTtlMs),
      });
      await this.webhooks.emitEvent(trx, 'approval.requested', turn.userId, {
        approvalId: approval.id,
        conversationId: approval.conversation_id,
        messageId: approval.message_id,
        toolName: approval.tool_name,
        arguments: call.arguments,
        argumentsDigest: approval.arguments_digest,
        expiresAt: approval.expires_at.getTime(),
      });
      return { message: turn.message, reply, failure: null, approval };
    });
  }

  /** Ends the turn's reply as complete: its totals stored, its last step charged, `chat.completed`. */
  complete(turn: Turn, step: Step): Promise<repo.MessageRow> {
    return this.end(turn, 'complete', step);
  }

  /**
   * Ends the turn's reply as stopped (its parts so far, the stopped step's text among them), the
   * stopped step charged (`step`, when a model call was on its way), `chat.completed` with `status: stopped`.
   */
  stop(turn: Turn, step: Step | null): Promise<repo.MessageRow> {
    return this.end(turn, 'stopped', step);
  }

  /** Ends the reply `status`, its last step (if any) charged, with its `chat.completed`. */
  private end(turn: Turn, status: 'complete' | 'stopped', step: Step | null): Promise<repo.MessageRow> {
    const { userId, reply, model } = turn;
    return this.write(async (trx) => {
      const now = new Date();
      const stored = await repo.endReply(trx, reply.id, { ...progress(turn), status, updated_at: now });
      // Already failed as interrupted (this instance outlived its lease), or the conversation was deleted meanwhile.
      if (!stored) return (await repo.findMessage(trx, reply.id)) ?? { ...reply, content: contentOf(turn.parts), status };
      if (step)
        await this.billing.charge(trx, {
          userId,
          kind: 'chat.reply',
          resourceId: stepResource(turn, step.index),
          model: model.info,
          connectionId: model.connectionId,
          usage: step.usage,
          at: now,
          hold: turn.hold,
        });
      await this.webhooks.emitEvent(trx, 'chat.completed', userId, {
        conversationId: reply.conversation_id,
        messageId: reply.id,
        model: model.info.id,
        content: stored.content,
        usage: presentUsage(turn.usage, turn.cost),
        citations: presentCitations(stored.citations),
        status,
      });
      return stored;
    });
  }

  /** Ends the reply as failed with `text` (what was written of it), and `chat.failed`. */
  fail(
    userId: string,
    reply: repo.MessageRow,
    model: string,
    text: string,
    failure: { code: FailureCode; error: string },
  ): Promise<repo.MessageRow> {
    return this.write(async (trx) => {
      const stored = await repo.endReply(trx, reply.id, {
        content: text,
        status: 'failed',
        error_code: failure.code,
        error_message: failure.error,
        updated_at: new Date(),
      });
      if (!stored)
        return (
          (await repo.findMessage(trx, reply.id)) ?? {
            ...reply,
            content: text,
            status: 'failed',
            error_code: failure.code,
            error_message: failure.error,
          }
        );
      await this.webhooks.emitEvent(trx, 'chat.failed', userId, {
        conversationId: reply.conversation_id,
        messageId: reply.id,
        model,
        errorCode: failure.code,
        error: failure.error,
      });
      return stored;
    });
  }

  /**
   * A turn's write of its reply's progress or outcome, in a transaction, tried again while the
   * database cannot be reached, for up to the reply's lease (which this instance renews again as
   * soon as it can): a turn that outlives a database restart ends as it would have, instead of
   * being left `generating`. Each write is guarded by the reply's state, so a repeat of one that
   * committed changes (and charges) nothing.
   */
  private write<T>(write: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
    return whileUnreachable(() => this.db.transaction().execute(write), { forMs: this.leaseMs });
  }
}
