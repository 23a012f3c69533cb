import type { Schemas } from '../../platform/api-types';
import { millis, millisOrNull } from '../../platform/db/timestamps';
import type { McpApprovalRow } from './repository';

/** An approval of an MCP call; a pending one past its expiry reads `expired` (it can no longer be decided). */
export function presentMcpApproval(row: McpApprovalRow, now = Date.now()): Schemas['McpApproval'] {
  const expired = row.status === 'pending' && millis(row.expires_at) <= now;
  const outcome = row.outcome as Schemas['McpToolOutcome'];
  return {
    approvalId: row.id,
    toolName: row.tool_name,
    arguments: row.arguments as Record<string, unknown>,
    argumentsDigest: row.arguments_digest,
    status: expired ? 'expired' : (row.status as Schemas['ApprovalStatus']),
    outcome: outcome ? { outcome: outcome.outcome, output: outcome.output, isError: outcome.isError, truncated: outcome.truncated } : null,
    delivered: row.outcome_delivered_at !== null,
    createdAt: millis(row.created_at),
    expiresAt: millis(row.expires_at),
    decidedAt: millisOrNull(row.decided_at),
  };
}
