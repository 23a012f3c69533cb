import type { Database } from '../../platform/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Actor, AuditService } from '../audit/service';
import type { WebhookService } from '../webhooks/service';
import type { ReplyLeases } from './leases';
import * as repo from './repository';
import type { TurnEngine } from './turn-engine';
import { argumentsDigest, type ChatObserver } from './turn';

export const APPROVAL_DECIDE_ACTION = 'tool.approval.decide';

const APPROVAL_EXPIRED = 'The tool call the reply waited on was not approved or denied in time.';
const EXPIRE_BATCH = 100;

export interface ApprovalServiceDeps {
  db: Database;
  audit: Pick<AuditService, 'record'>;
  webhooks: Pick<WebhookService, 'emitEvent'>;
  leases: Pick<ReplyLeases, 'hold' | 'release' | 'leaseMs'>;
  /** Continues a turn once its approval is decided. */
  turns: Pick<TurnEngine, 'resume'>;
  observer: Pick<ChatObserver, 'approvalWait'>;
}

/**
 * The approvals of tool calls that chat turns pause for: the caller's pending ones, their single
 * decision (audited), after which the turn goes on, and the end of those left undecided too long.
 */
export class ApprovalService {
  private readonly db: Database;
  private readonly audit: Pick<AuditService, 'record'>;
  private readonly webhooks: Pick<WebhookService, 'emitEvent'>;
  private readonly leases: Pick<ReplyLeases, 'hold' | 'release' | 'leaseMs'>;
  private readonly turns: Pick<TurnEngine, 'resume'>;
  private readonly observer: Pick<ChatObserver, 'approvalWait'>;

  constructor({ db, audit, webhooks, leases, turns, observer }: ApprovalServiceDeps) {
    this.db = db;
    this.audit = audit;
    this.webhooks = webhooks;
    this.leases = leases;
    this.turns = turns;
    this.observer = observer;
  }

  /** The caller's approval `approvalId` (404 when it is not theirs). */
  async approval(userId: string, approvalId: string): Promise<repo.ApprovalRow> {
    const row = await repo.findApproval(this.db, userId, approvalId);
    if (!row) throw errors.notFound('Approval not found.');
    return row;
  }

  /** A page of the caller's pending approvals. */
  pendingApprovals(userId: string, page: PageRequest) {
    return repo.pendingApprovalList.page(this.db, { userId, now: new Date() }, page);
  }

  /**
   * Decides the caller's pending approval once (audited), then continues the paused turn to its
   * next stop. Refused (and nothing runs): not theirs (404), decided (409), expired (410), other
   * arguments than the approval's (409).
   */
  async decide(
    actor: Actor,
    input: { approvalId: string; decision: 'approve' | 'deny'; arguments?: Record<string, unknown> },
  ): Promise<{ approval: repo.ApprovalRow; reply: repo.MessageRow }> {
    const userId = actor.userId;
    const found = await this.approval(userId, input.approvalId);
    const now = new Date();
    if (found.status === 'expired' || (found.status === 'pending' && found.expires_at.getTime() <= now.getTime()))
      throw errors.approvalExpired();
    if (found.status !== 'pending') throw errors.conflict(`This approval was already decided (${found.status}); a decision is single use.`);
    if (input.arguments !== undefined && argumentsDigest(input.arguments) !== found.arguments_digest) {
      throw errors.conflict('The arguments differ from those the approval is bound to (their digest does not match); nothing ran.');
    }
    const approve = input.decision === 'approve';
    const decided = await this.db.transaction().execute(async (trx) => {
      const approval = await repo.decideApproval(trx, found.id, approve ? 'approved' : 'denied', now);
      if (!approval) return null;
      const reply = await repo.resumeReply(trx, approval.message_id, this.leases.leaseMs, now);
      if (!reply) throw new Error(`the reply of pending approval ${approval.id} is not awaiting approval`);
      await this.audit.record(
        actor,
        {
          action: APPROVAL_DECIDE_ACTION,
          resourceType: 'approval',
          resourceId: approval.id,
          outcome: 'success',
          metadata: {
            decision: input.decision,
            toolName: approval.tool_name,
            argumentsDigest: approval.arguments_digest,
            conversationId: approval.conversation_id,
            messageId: approval.message_id,
          },
        },
        trx,
      );
      return { approval, reply };
    });
    if (!decided) {
      // Decided or expired by a concurrent call between the read and the update.
      const again = await this.approval(userId, input.approvalId);
      if (again.status === 'expired' || again.status === 'pending') throw errors.approvalExpired();
      throw errors.conflict(`This approval was already decided (${again.status}); a decision is single use.`);
    }
    const { approval, reply } = decided;
    this.observer.approvalWait((now.getTime() - approval.created_at.getTime()) / 1000, input.decision);
    this.leases.hold(reply.id);
    try {
      return { approval, reply: await this.turns.resume(userId, reply, approval, approve) };
    } finally {
      this.leases.release(reply.id);
    }
  }

  /**
   * Ends the replies whose approval expired undecided: the approval `expired`, the reply `failed`
   * (`approval_expired`) with its `chat.failed`, in one transaction per batch. Resolves with how many.
   */
  async expireApprovals(now: Date = new Date()): Promise<number> {
    let ended = 0;
    for (;;) {
      const batch = await this.db.transaction().execute(async (trx) => {
        const replies = await repo.expireApprovals(trx, now, APPROVAL_EXPIRED, EXPIRE_BATCH);
        for (const reply of replies) {
          await this.webhooks.emitEvent(trx, 'chat.failed', reply.owner_user_id, {
            conversationId: reply.conversation_id,
            messageId: reply.id,
            model: reply.model,
            errorCode: 'approval_expired',
            error: APPROVAL_EXPIRED,
          });
        }
        return replies.length;
      });
      ended += batch;
      if (batch < EXPIRE_BATCH) return ended;
    }
  }
}
