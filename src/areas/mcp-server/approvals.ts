import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { Database } from '../../platform/db';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { PageRequest } from '../../platform/pagination';
import type { Actor, AuditService } from '../audit/service';
import type { ToolRunResult, ToolService } from '../tools/service';
import * as repo from './repository';

/** The audit action of a decision, the same as chat's (its metadata says `origin: mcp`). */
const APPROVAL_DECIDE_ACTION = 'tool.approval.decide';

/** How an approved call ended, as stored on its approval and given to the MCP client. */
export type StoredOutcome = Pick<ToolRunResult, 'outcome' | 'output' | 'isError' | 'truncated'>;

/** SHA-256 (hex) of the RFC 8785 canonical JSON of `args`: what an approval is bound to (as in chat). */
export const argumentsDigest = (args: unknown) =>
  createHash('sha256')
    .update(canonicalize(args) ?? '')
    .digest('hex');

export interface McpApprovalServiceDeps {
  db: Database;
  audit: Pick<AuditService, 'record'>;
  tools: Pick<ToolService, 'forTurn'>;
  /** How long an approval waits for the user's decision (the deployment's APPROVAL_TTL_MS). */
  approvalTtlMs: number;
}

/** What a call of an `approval_required` tool through MCP finds: a decision to give, or an approval to wait for. */
export type CallState =
  | { state: 'pending'; approval: repo.McpApprovalRow }
  | { state: 'approved'; approval: repo.McpApprovalRow; outcome: StoredOutcome | null }
  | { state: 'denied'; approval: repo.McpApprovalRow };

/**
 * The approvals of tool calls made through the MCP server: asked for by a call (one pending per
 * user, tool and arguments), decided once by the user (an approved call runs exactly once and
 * its outcome is stored), and given back to the client when it calls again with the same
 * arguments.
 */
export class McpApprovalService {
  private readonly db: Database;
  private readonly audit: Pick<AuditService, 'record'>;
  private readonly tools: Pick<ToolService, 'forTurn'>;
  private readonly approvalTtlMs: number;

  constructor({ db, audit, tools, approvalTtlMs }: McpApprovalServiceDeps) {
    this.db = db;
    this.audit = audit;
    this.tools = tools;
    this.approvalTtlMs = approvalTtlMs;
  }

  /**
   * A call of `toolName` with `args` that needs approval: the decision not yet given to the client
   * (delivered now, so the next identical call asks again), else the approval still pending, else
   * a new one.
   */
  async call(userId: string, toolName: string, args: Record<string, unknown>): Promise<CallState> {
    const digest = argumentsDigest(args);
    const now = new Date();
    const open = await repo.openApprovalOf(this.db, userId, toolName, digest, now);
    if (open) return this.deliver(open, now);
    const created = await this.db.transaction().execute(async (trx) => {
      await repo.expireStale(trx, userId, toolName, digest, now);
      return repo.insertMcpApproval(trx, {
        id: uuidv7(now.getTime()),
        userId,
        toolName,
        arguments: args,
        argumentsDigest: digest,
        createdAt: now,
        expiresAt: new Date(now.getTime() + this.approvalTtlMs),
      });
    });
    if (created) return { state: 'pending', approval: created };
    // An identical call asked at the same moment: wait on that approval.
    const again = await repo.openApprovalOf(this.db, userId, toolName, digest, now);
    if (!again) throw new Error(`no open approval of ${toolName} after a conflicting insert`);
    return this.deliver(again, now);
  }

  /** A pending approval as it is; a decided one, given to the client once its outcome is there. */
  private async deliver(approval: repo.McpApprovalRow, now: Date): Promise<CallState> {
    if (approval.status === 'pending') return { state: 'pending', approval };
    if (approval.status === 'approved' && approval.outcome === null) return { state: 'approved', approval, outcome: null };
    const delivered = (await repo.markDelivered(this.db, approval.id, now)) ?? approval;
    if (delivered.status === 'denied') return { state: 'denied', approval: delivered };
    return { state: 'approved', approval: delivered, outcome: delivered.outcome as unknown as StoredOutcome };
  }

  /** The caller's approval of an MCP call (404 when it is not theirs, or is a chat turn's). */
  async approval(userId: string, approvalId: string): Promise<repo.McpApprovalRow> {
    const row = await repo.findMcpApproval(this.db, userId, approvalId);
    if (!row) throw errors.notFound('Approval not found.');
    return row;
  }

  /** A page of the caller's pending approvals of MCP calls. */
  pendingApprovals(userId: string, page: PageRequest) {
    return repo.pendingMcpApprovalList.page(this.db, { userId, now: new Date() }, page);
  }

  /**
   * Decides the caller's pending approval once (audited); an approved call then runs, once, and
   * its outcome is stored. Refused (and nothing runs): not theirs (404), decided (409), expired
   * (410), other arguments than the approval's (409).
   */
  async decide(
    actor: Actor,
    input: { approvalId: string; decision: 'approve' | 'deny'; arguments?: Record<string, unknown> },
  ): Promise<repo.McpApprovalRow> {
    const found = await this.approval(actor.userId, input.approvalId);
    const now = new Date();
    if (found.status === 'expired' || (found.status === 'pending' && found.expires_at.getTime() <= now.getTime()))
      throw errors.approvalExpired();
    if (found.status !== 'pending') throw errors.conflict(`This approval was already decided (${found.status}); a decision is single use.`);
    if (input.arguments !== undefined && argumentsDigest(input.arguments) !== found.arguments_digest) {
      throw errors.conflict('The arguments differ from those the approval is bound to (their digest does not match); nothing ran.');
    }
    const approve = input.decision === 'approve';
    // The conditional update lets one decision through, however many requests or instances try.
    const decided = await this.db.transaction().execute(async (trx) => {
      const approval = await repo.decideMcpApproval(trx, found.id, approve ? 'approved' : 'denied', now);
      if (!approval) return null;
      await this.audit.record(
        actor,
        {
          action: APPROVAL_DECIDE_ACTION,
          resourceType: 'approval',
          resourceId: approval.id,
          outcome: 'success',
          metadata: { decision: input.decision, toolName: approval.tool_name, argumentsDigest: approval.arguments_digest, origin: 'mcp' },
        },
        trx,
      );
      return approval;
    });
    if (!decided) {
      const again = await this.approval(actor.userId, input.approvalId);
      if (again.status === 'expired' || again.status === 'pending') throw errors.approvalExpired();
      throw errors.conflict(`This approval was already decided (${again.status}); a decision is single use.`);
    }
    if (!approve) return decided;
    let outcome: StoredOutcome;
    try {
      outcome = await this.run(actor.userId, decided);
    } catch (error) {
      // The service failed around the call (its registry could not be read): the approved call is
      // settled as failed, so it never runs later and the client is not told it is still running.
      await repo.storeOutcome(this.db, decided.id, {
        outcome: 'error',
        output: 'The tool could not be run.',
        isError: true,
        truncated: false,
      });
      throw error;
    }
    return (await repo.storeOutcome(this.db, decided.id, outcome)) ?? decided;
  }

  /** Runs the approved call with its bound arguments, as the tool is now (one that became `deny` does not run). */
  private async run(userId: string, approval: repo.McpApprovalRow): Promise<StoredOutcome> {
    const tools = await this.tools.forTurn(userId);
    const definition = tools.find(approval.tool_name);
    if (!definition)
      return { outcome: 'not_found', output: `There is no tool named ${approval.tool_name}.`, isError: true, truncated: false };
    if (definition.policy === 'deny')
      return {
        outcome: 'denied',
        output: `The tool ${approval.tool_name} is not allowed: its policy is deny. It did not run.`,
        isError: true,
        truncated: false,
      };
    const { outcome, output, isError, truncated } = await tools.run(approval.tool_name, approval.arguments, new AbortController().signal);
    return { outcome, output, isError, truncated };
  }
}
