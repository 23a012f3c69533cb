/** The approvals tool calls wait for. */
import { type Insertable, type Selectable, sql, type Transaction } from 'kysely';
import type { ToolApprovals } from '../../../../generated/db';
import type { Database, DB } from '../../../platform/db';
import { type ListedRecord, listQuery } from '../../../platform/db/list-query';
import { epochMs, epochMsOrNull } from '../../../platform/db/timestamps';

/**
 * An approval of a chat turn (origin `chat`): always bound to its conversation, reply and call id
 * (a check constraint holds it). Approvals of calls made through the MCP server are the
 * mcp-server area's; every query here reads chat's only.
 */
export type ApprovalRow = Selectable<ToolApprovals> & { conversation_id: string; message_id: string; tool_call_id: string };

type ChatApprovalInsert = Insertable<ToolApprovals> & { conversation_id: string; message_id: string; tool_call_id: string };

export async function insertApproval(trx: Transaction<DB>, row: ChatApprovalInsert): Promise<ApprovalRow> {
  return (await trx
    .insertInto('tool_approvals')
    .values({ ...row, origin: 'chat' })
    .returningAll()
    .executeTakeFirstOrThrow()) as ApprovalRow;
}

export async function findApproval(db: Database, userId: string, id: string): Promise<ApprovalRow | undefined> {
  return (await db
    .selectFrom('tool_approvals')
    .selectAll()
    .where('user_id', '=', userId)
    .where('id', '=', id)
    .where('origin', '=', 'chat')
    .executeTakeFirst()) as ApprovalRow | undefined;
}

/** What an approval is presented with: the list reads only these, and its times as epoch milliseconds. */
const APPROVAL_FIELDS = [
  'id',
  'conversation_id',
  'message_id',
  'tool_call_id',
  'tool_name',
  'arguments',
  'arguments_digest',
  'status',
] as const;

/** The user's approvals still pending at `now`; read a page at a time. */
export const pendingApprovalList = listQuery({
  id: 'id',
  rows: (db, { userId, now }: { userId: string; now: Date }) =>
    db
      .selectFrom('tool_approvals')
      .select([...APPROVAL_FIELDS, epochMs('created_at'), epochMs('expires_at'), epochMsOrNull('decided_at')])
      .where('user_id', '=', userId)
      // Written into the statement, so that the index of pending approvals serves a prepared plan too.
      .where('origin', '=', sql.lit('chat'))
      .where('status', '=', sql.lit('pending'))
      .where('expires_at', '>', now)
      .$narrowType<{ conversation_id: string; message_id: string; tool_call_id: string }>(),
});

export type ApprovalView = ListedRecord<ApprovalRow, typeof pendingApprovalList>;

/** Decides a pending approval once; undefined when it was decided (or expired) meanwhile. */
export async function decideApproval(trx: Transaction<DB>, id: string, status: 'approved' | 'denied', now: Date) {
  return (await trx
    .updateTable('tool_approvals')
    .set({ status, decided_at: now })
    .where('id', '=', id)
    .where('origin', '=', 'chat')
    .where('status', '=', 'pending')
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst()) as ApprovalRow | undefined;
}

/**
 * Expires up to `limit` pending approvals past their expiry and fails the replies they paused,
 * in one transaction (rows locked, so of several instances one ends each). Returns the replies ended.
 */
export async function expireApprovals(trx: Transaction<DB>, now: Date, error: string, limit: number) {
  const picked = trx
    .selectFrom('tool_approvals')
    .select('id')
    .where('origin', '=', 'chat')
    .where('status', '=', 'pending')
    .where('expires_at', '<=', now)
    .limit(limit)
    .forUpdate()
    .skipLocked();
  const expired = await trx
    .updateTable('tool_approvals')
    .set({ status: 'expired' })
    .where('id', 'in', picked)
    .where('status', '=', 'pending')
    .returning('message_id')
    .$narrowType<{ message_id: string }>()
    .execute();
  if (expired.length === 0) return [];
  return trx
    .updateTable('messages')
    .set({ status: 'failed', error_code: 'approval_expired', error_message: error, locked_until: null, updated_at: now })
    .where(
      'id',
      'in',
      expired.map((e) => e.message_id),
    )
    .where('status', '=', 'awaiting_approval')
    .returningAll()
    .execute();
}

// The stored stream events of replies, and the stop requests of replies.

/** The pending approval a paused reply waits for. */
export async function pendingApprovalOf(db: Database, messageId: string): Promise<ApprovalRow | undefined> {
  return (await db
    .selectFrom('tool_approvals')
    .selectAll()
    .where('message_id', '=', messageId)
    .where('status', '=', 'pending')
    .executeTakeFirst()) as ApprovalRow | undefined;
}
