import { type Insertable, type Selectable, sql, type Transaction, type Updateable } from 'kysely';
import type { Conversations, Messages, ToolApprovals } from '../../../generated/db';
import type { Database, DB } from '../../platform/db';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';
import { epochMs, epochMsOrNull } from '../../platform/db/timestamps';

export type ConversationRow = Selectable<Conversations>;
export type MessageRow = Selectable<Messages>;
export type ApprovalRow = Selectable<ToolApprovals>;

export const { find: findConversation, update: updateConversation, remove: deleteConversation } = ownedRecords('conversations');

/** The owner's conversations, filtered; read a page at a time. */
export const conversationList = ownedList('conversations', {
  fields: ['title', 'project_id', 'archived', 'model', 'temporary'],
  times: ['created_at', 'updated_at'],
  filters: { projectId: 'project_id', archived: 'archived', temporary: 'temporary' },
});
export type ConversationView = ListedRecord<'conversations', typeof conversationList>;

export function insertConversation(db: Database, row: Insertable<Conversations>) {
  return db.insertInto('conversations').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Deletes (with their messages) up to `limit` temporary conversations last active before `before`; returns how many. */
export async function deleteIdleTemporary(db: Database, before: Date, limit: number): Promise<number> {
  const idle = db.selectFrom('conversations').select('id').where('temporary', '=', true).where('updated_at', '<', before).limit(limit);
  const deleted = await db.deleteFrom('conversations').where('id', 'in', idle).where('temporary', '=', true).executeTakeFirst();
  return Number(deleted.numDeletedRows);
}

/**
 * Replaces the title a conversation was given from its first message (`from`) by `title`, unless
 * it changed meanwhile (the user renamed it); whether it did.
 */
export async function replaceTitle(trx: Transaction<DB>, id: string, from: string, title: string): Promise<boolean> {
  const result = await trx.updateTable('conversations').set({ title }).where('id', '=', id).where('title', '=', from).executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** What a message is presented with: the list reads only these, and its times as epoch milliseconds. */
const MESSAGE_FIELDS = [
  'id',
  'conversation_id',
  'role',
  'content',
  'citations',
  'attachments',
  'status',
  'agent_id',
  'model',
  'error_code',
  'error_message',
  'input_tokens',
  'output_tokens',
  'cost_micro_cents',
  'parts',
] as const;

/** A conversation's messages; read a page at a time. */
export const messageList = listQuery({
  id: 'id',
  rows: (db, { conversationId }: { conversationId: string }) =>
    db
      .selectFrom('messages')
      .select([...MESSAGE_FIELDS, epochMs('created_at'), epochMs('updated_at')])
      .where('conversation_id', '=', conversationId),
});
export type MessageView = ListedRecord<MessageRow, typeof messageList>;

/** The last `limit` complete messages before `beforeId`, oldest first: the prompt's history. */
export async function history(db: Database, conversationId: string, beforeId: string, limit: number) {
  const rows = await db
    .selectFrom('messages')
    .select(['role', 'content'])
    .where('conversation_id', '=', conversationId)
    .where('status', '=', 'complete')
    .where('id', '<', beforeId)
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.reverse();
}

export function findGreeting(db: Database, conversationId: string, agentId: string) {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('conversation_id', '=', conversationId)
    .where('agent_id', '=', agentId)
    .where('kind', '=', 'greeting')
    .executeTakeFirst();
}

export function findMessage(db: Database, id: string) {
  return db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirst();
}

export function insertMessage(db: Database, row: Insertable<Messages>) {
  return db.insertInto('messages').values(row).returningAll().executeTakeFirstOrThrow();
}

/**
 * The end of a reply's lease `ms` from now, on the database's clock: the instance that writes a
 * lease and the one that sweeps it compare times on one clock, whatever their own clocks or how
 * long the writing instance waited before its statement ran.
 */
const leaseEnd = (ms: number) => sql<Date>`now() + cast(${`${ms} milliseconds`} as interval)`;

/**
 * Stores a turn's message and its pending reply (held for `leaseMs` from the insert) and touches
 * the conversation, in one statement (atomic as a transaction would be, in one round trip instead of five).
 */
export async function insertTurn(
  db: Database,
  conversation: { ownerUserId: string; id: string; changes: Updateable<Conversations> },
  message: Insertable<Messages>,
  reply: Insertable<Messages>,
  leaseMs: number,
) {
  const rows = await db
    .with('touched', (qb) =>
      qb
        .updateTable('conversations')
        .set(conversation.changes)
        .where('owner_user_id', '=', conversation.ownerUserId)
        .where('id', '=', conversation.id)
        .returning('id'),
    )
    .insertInto('messages')
    .values([message, { ...reply, locked_until: leaseEnd(leaseMs) }])
    .returningAll()
    .execute();
  const stored = rows.find((row) => row.id === message.id);
  const pending = rows.find((row) => row.id === reply.id);
  if (!stored || !pending) throw new Error("the turn's messages were not stored");
  return [stored, pending] as const;
}

/**
 * Ends a reply still being generated (its lease released); undefined when it is gone (its
 * conversation was deleted meanwhile) or already ended (failed as interrupted after its lease).
 */
export function endReply(trx: Transaction<DB>, id: string, changes: Updateable<Messages>) {
  return trx
    .updateTable('messages')
    .set({ ...changes, locked_until: null })
    .where('id', '=', id)
    .where('status', '=', 'generating')
    .returningAll()
    .executeTakeFirst();
}

/** Stores a reply's citations (a JSON array) while it is being generated. */
export async function setReplyCitations(db: Database, id: string, citations: string): Promise<void> {
  await db.updateTable('messages').set({ citations }).where('id', '=', id).where('status', '=', 'generating').execute();
}

/** Extends the leases of these replies to `leaseMs` from now, while they are still being generated. */
export async function renewReplyLeases(db: Database, ids: string[], leaseMs: number): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('messages')
    .set({ locked_until: leaseEnd(leaseMs) })
    .where('id', 'in', ids)
    .where('status', '=', 'generating')
    .execute();
}

/**
 * Fails as `interrupted` up to `limit` replies still generating whose lease has run out on the
 * database's clock (their instance stopped), except the sweeping instance's own (`alive`), or,
 * with `ids`, these replies whatever their lease. One statement, so of several instances only one
 * ends (and reports) each reply.
 */
export async function interruptReplies(
  trx: Transaction<DB>,
  now: Date,
  error: string,
  limit: number,
  target: { ids: string[] } | { alive: string[] },
) {
  if ('ids' in target && target.ids.length === 0) return [];
  const picked = trx
    .selectFrom('messages')
    .select('id')
    .where('status', '=', 'generating')
    .$call((q) => {
      if ('ids' in target) return q.where('id', 'in', target.ids);
      const lapsed = q.where('locked_until', '<', sql<Date>`now()`);
      return target.alive.length > 0 ? lapsed.where('id', 'not in', target.alive) : lapsed;
    })
    .limit(limit)
    .forUpdate()
    .skipLocked();
  return trx
    .updateTable('messages')
    .set({ status: 'failed', error_code: 'interrupted', error_message: error, locked_until: null, updated_at: now })
    .where('id', 'in', picked)
    .where('status', '=', 'generating')
    .returningAll()
    .execute();
}

/** The user message a reply answers: the last user message before it. */
export function userMessageBefore(db: Database, conversationId: string, replyId: string) {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('conversation_id', '=', conversationId)
    .where('role', '=', 'user')
    .where('id', '<', replyId)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/** Records a reply's progress between model calls (its parts and usage so far), while it is generated. */
export function updateGenerating(trx: Transaction<DB>, id: string, changes: Updateable<Messages>) {
  return trx.updateTable('messages').set(changes).where('id', '=', id).where('status', '=', 'generating').returningAll().executeTakeFirst();
}

/** Pauses a reply being generated for an approval (its lease released); undefined when it already ended. */
export function pauseReply(trx: Transaction<DB>, id: string, changes: Updateable<Messages>) {
  return trx
    .updateTable('messages')
    .set({ ...changes, status: 'awaiting_approval', locked_until: null })
    .where('id', '=', id)
    .where('status', '=', 'generating')
    .returningAll()
    .executeTakeFirst();
}

/** Resumes a paused reply (generating again, under this instance's lease of `leaseMs`); undefined when it is not paused. */
export function resumeReply(trx: Transaction<DB>, id: string, leaseMs: number, now: Date) {
  return trx
    .updateTable('messages')
    .set({ status: 'generating', locked_until: leaseEnd(leaseMs), updated_at: now })
    .where('id', '=', id)
    .where('status', '=', 'awaiting_approval')
    .returningAll()
    .executeTakeFirst();
}

export function insertApproval(trx: Transaction<DB>, row: Insertable<ToolApprovals>) {
  return trx.insertInto('tool_approvals').values(row).returningAll().executeTakeFirstOrThrow();
}

export function findApproval(db: Database, userId: string, id: string) {
  return db.selectFrom('tool_approvals').selectAll().where('user_id', '=', userId).where('id', '=', id).executeTakeFirst();
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
      .where('status', '=', 'pending')
      .where('expires_at', '>', now),
});
export type ApprovalView = ListedRecord<ApprovalRow, typeof pendingApprovalList>;

/** Decides a pending approval once; undefined when it was decided (or expired) meanwhile. */
export function decideApproval(trx: Transaction<DB>, id: string, status: 'approved' | 'denied', now: Date) {
  return trx
    .updateTable('tool_approvals')
    .set({ status, decided_at: now })
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Expires up to `limit` pending approvals past their expiry and fails the replies they paused,
 * in one transaction (rows locked, so of several instances one ends each). Returns the replies ended.
 */
export async function expireApprovals(trx: Transaction<DB>, now: Date, error: string, limit: number) {
  const picked = trx
    .selectFrom('tool_approvals')
    .select('id')
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
