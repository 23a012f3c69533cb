/** The approvals of tool calls made through the MCP server (`tool_approvals` rows of origin `mcp`). */
import { type Selectable, sql, type Transaction } from 'kysely';
import type { ToolApprovals } from '../../../generated/db';
import type { Database, DB } from '../../platform/db';
import { listQuery } from '../../platform/db/list-query';

export type McpApprovalRow = Selectable<ToolApprovals>;

export interface NewMcpApproval {
  id: string;
  userId: string;
  toolName: string;
  arguments: Record<string, unknown>;
  argumentsDigest: string;
  createdAt: Date;
  expiresAt: Date;
}

const mcp = (db: Database) => db.selectFrom('tool_approvals').selectAll().where('origin', '=', 'mcp');

/** Inserts a pending approval; undefined when one is already pending for the same user, tool and arguments. */
export async function insertMcpApproval(trx: Transaction<DB>, row: NewMcpApproval): Promise<McpApprovalRow | undefined> {
  return trx
    .insertInto('tool_approvals')
    .values({
      id: row.id,
      user_id: row.userId,
      origin: 'mcp',
      tool_name: row.toolName,
      arguments: JSON.stringify(row.arguments),
      arguments_digest: row.argumentsDigest,
      status: 'pending',
      created_at: row.createdAt,
      expires_at: row.expiresAt,
    })
    .onConflict((oc) =>
      oc.columns(['user_id', 'tool_name', 'arguments_digest']).where('origin', '=', 'mcp').where('status', '=', 'pending').doNothing(),
    )
    .returningAll()
    .executeTakeFirst();
}

/** Marks the user's pending approvals of this call that are past their expiry as expired (they no longer block a new one). */
export async function expireStale(trx: Transaction<DB>, userId: string, toolName: string, digest: string, now: Date): Promise<void> {
  await trx
    .updateTable('tool_approvals')
    .set({ status: 'expired' })
    .where('origin', '=', 'mcp')
    .where('user_id', '=', userId)
    .where('tool_name', '=', toolName)
    .where('arguments_digest', '=', digest)
    .where('status', '=', 'pending')
    .where('expires_at', '<=', now)
    .execute();
}

/**
 * The newest approval of this call whose decision the client has not been given: pending (and
 * not expired), or decided and not yet delivered.
 */
export function openApprovalOf(db: Database, userId: string, toolName: string, digest: string, now: Date) {
  return mcp(db)
    .where('user_id', '=', userId)
    .where('tool_name', '=', toolName)
    .where('arguments_digest', '=', digest)
    .where('outcome_delivered_at', 'is', null)
    .where((eb) => eb.or([eb.and([eb('status', '=', 'pending'), eb('expires_at', '>', now)]), eb('status', 'in', ['approved', 'denied'])]))
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

export function findMcpApproval(db: Database, userId: string, id: string) {
  return mcp(db).where('user_id', '=', userId).where('id', '=', id).executeTakeFirst();
}

/** The user's approvals of MCP calls still pending at `now`; read a page at a time. */
export const pendingMcpApprovalList = listQuery({
  id: 'id',
  rows: (db, { userId, now }: { userId: string; now: Date }) =>
    // `pending` written into the statement, so that the index of pending approvals serves a prepared plan too.
    mcp(db).where('user_id', '=', userId).where('status', '=', sql.lit('pending')).where('expires_at', '>', now),
});

/** Decides a pending approval once; undefined when it was decided (or expired) meanwhile. */
export function decideMcpApproval(trx: Transaction<DB>, id: string, status: 'approved' | 'denied', now: Date) {
  return trx
    .updateTable('tool_approvals')
    .set({ status, decided_at: now })
    .where('id', '=', id)
    .where('origin', '=', 'mcp')
    .where('status', '=', 'pending')
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst();
}

/** Stores the outcome of the approved call (once). */
export function storeOutcome(db: Database, id: string, outcome: unknown) {
  return db
    .updateTable('tool_approvals')
    .set({ outcome: JSON.stringify(outcome) })
    .where('id', '=', id)
    .where('outcome', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

/** Records that the client was given the decision (the outcome, or the denial). */
export function markDelivered(db: Database, id: string, now: Date) {
  return db
    .updateTable('tool_approvals')
    .set({ outcome_delivered_at: now })
    .where('id', '=', id)
    .where('outcome_delivered_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}
