import { type Insertable, type Selectable, sql, type Transaction, type Updateable } from 'kysely';
import type { Conversations, Messages, ToolApprovals } from '../../../generated/db';
import type { Database, DB } from '../../platform/db';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';
import { type PageRequest, toPage } from '../../platform/pagination';
import { epochMs, epochMsOrNull } from '../../platform/db/timestamps';

export type ConversationRow = Selectable<Conversations>;
export type MessageRow = Selectable<Messages>;
export type ApprovalRow = Selectable<ToolApprovals>;

export const { find: findConversation, update: updateConversation, remove: deleteConversation } = ownedRecords('conversations');

/** The owner's conversations, filtered; read a page at a time. */
export const conversationList = ownedList('conversations', {
  fields: ['title', 'project_id', 'archived', 'model', 'temporary', 'current_leaf_id'],
  times: ['created_at', 'updated_at'],
  filters: { projectId: 'project_id', archived: 'archived', temporary: 'temporary' },
});
export type ConversationView = ListedRecord<'conversations', typeof conversationList>;

export function insertConversation(db: Database, row: Insertable<Conversations>) {
  return db.insertInto('conversations').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Deletes (with their messages) up to `limit` temporary conversations last active before `before`; returns how many. */
export async function deleteIdleTemporary(db: Database, before: Date, limit: number): Promise<number> {
  // A conversation with a reply still being written or waiting for an approval is not idle.
  const idle = db
    .selectFrom('conversations as c')
    .select('c.id')
    .where('c.temporary', '=', true)
    .where('c.updated_at', '<', before)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('messages as m')
            .select('m.id')
            .whereRef('m.conversation_id', '=', 'c.id')
            .where('m.status', 'in', ['generating', 'awaiting_approval']),
        ),
      ),
    )
    .limit(limit);
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
  'parent_id',
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

/**
 * The path of a conversation's tree from `start` (a message of the conversation) up towards its
 * first message, at most `depth + 1` messages: each with its distance from `start`.
 */
function branchPath(db: Database, conversationId: string, start: string, depth: number) {
  return db.withRecursive('path(id, parent_id, depth)', (qb) =>
    qb
      .selectFrom('messages')
      .select(['id', 'parent_id', sql<number>`0`.as('depth')])
      .where('conversation_id', '=', conversationId)
      .where('id', '=', start)
      .unionAll(
        qb
          .selectFrom('messages as m')
          .innerJoin('path as p', 'p.parent_id', 'm.id')
          .select(['m.id', 'm.parent_id', sql<number>`p.depth + 1`.as('depth')])
          .where('p.depth', '<', depth),
      ),
  );
}

/** How far up a branch a turn's history looks for its complete messages. */
const HISTORY_DEPTH_FACTOR = 4;

/**
 * The last `limit` complete (or stopped) messages of the branch up from `start` (a message of the
 * conversation, or its current leaf when undefined), oldest first: a turn's history; with the
 * message it started from (null: none was found). Failed replies are skipped, within
 * `HISTORY_DEPTH_FACTOR × limit` messages up the branch.
 */
export async function branchHistory(db: Database, conversationId: string, start: string | undefined, limit: number) {
  // The path carries what the history needs (no join after it): on the turn's way to the model's first token.
  const anchor = start !== undefined ? sql`${start}` : sql`(select current_leaf_id from conversations where id = ${conversationId})`;
  const { rows } = await sql<{ id: string; role: string; content: string; status: string; depth: number }>`
    with recursive path (id, parent_id, role, content, status, depth) as (
      select id, parent_id, role, content, status, 0 from messages where conversation_id = ${conversationId} and id = ${anchor}
      union all
      select m.id, m.parent_id, m.role, m.content, m.status, p.depth + 1 from messages m join path p on m.id = p.parent_id
      where p.depth < ${HISTORY_DEPTH_FACTOR * limit}
    )
    select id, role, content, status, depth from path order by depth`.execute(db);
  const messages = rows.filter((m) => m.status === 'complete' || m.status === 'stopped').slice(0, limit);
  return {
    startId: rows[0]?.depth === 0 ? rows[0].id : null,
    messages: messages.map(({ role, content }) => ({ role, content })).reverse(),
  };
}

/**
 * A page of the branch that ends at `leafId` (newest first, as `messageList` reads a page): walked
 * up from the leaf, or from the previous page's last message, one page and one more at a time.
 */
export async function branchPage(db: Database, conversationId: string, leafId: string | null, page: PageRequest) {
  const start = page.beforeId ?? leafId;
  if (start === null) return { items: [], nextCursor: null };
  const skip = page.beforeId === null ? 0 : 1;
  const rows = await branchPath(db, conversationId, start, page.limit + skip)
    .selectFrom('path')
    .innerJoin('messages', 'messages.id', 'path.id')
    .select([...MESSAGE_FIELDS.map((f) => `messages.${f}` as const), epochMs('messages.created_at'), epochMs('messages.updated_at')])
    .where('path.depth', '>=', skip)
    .orderBy('path.depth')
    .execute();
  return toPage(rows, page.limit);
}

/**
 * The leaf of the branch through `messageId` (a message of the conversation): down its newest
 * child at each step. Undefined when it is not a message of the conversation.
 */
export async function leafBelow(db: Database, conversationId: string, messageId: string): Promise<string | undefined> {
  const { rows } = await sql<{ id: string }>`
    with recursive down (id, depth) as (
      select id, 0 from messages where id = ${messageId} and conversation_id = ${conversationId}
      union all
      select c.id, d.depth + 1 from down d
      cross join lateral (select m.id from messages m where m.parent_id = d.id order by m.id desc limit 1) c
    )
    select id from down order by depth desc limit 1`.execute(db);
  return rows[0]?.id;
}

/** The newest first message of a conversation (the root of its newest tree), if any. */
export async function newestRoot(db: Database, conversationId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('messages')
    .select('id')
    .where('conversation_id', '=', conversationId)
    .where('parent_id', 'is', null)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.id;
}

/** The ids of the children of each of `parentIds` (null: the conversation's first messages), oldest first. */
export async function childrenOf(db: Database, conversationId: string, parentIds: ReadonlyArray<string | null>) {
  const ids = [...new Set(parentIds.filter((id): id is string => id !== null))];
  const roots = parentIds.includes(null);
  if (ids.length === 0 && !roots) return new Map<string | null, string[]>();
  const rows = await db
    .selectFrom('messages')
    .select(['id', 'parent_id'])
    .where('conversation_id', '=', conversationId)
    .where((eb) => {
      const any = [];
      if (ids.length > 0) any.push(eb('parent_id', 'in', ids));
      if (roots) any.push(eb('parent_id', 'is', null));
      return eb.or(any);
    })
    .orderBy('id')
    .execute();
  const children = new Map<string | null, string[]>();
  for (const row of rows) children.set(row.parent_id, [...(children.get(row.parent_id) ?? []), row.id]);
  return children;
}

/** A message of one of the user's conversations. */
export function findOwnedMessage(db: Database, userId: string, id: string) {
  return db.selectFrom('messages').selectAll().where('owner_user_id', '=', userId).where('id', '=', id).executeTakeFirst();
}

/** How many messages the subtree of `messageId` holds, and whether a reply in it is being generated. */
export async function subtreeOf(trx: Transaction<DB>, messageId: string) {
  const { rows } = await sql<{ count: string; generating: boolean | null }>`
    with recursive below (id) as (
      select id from messages where id = ${messageId}
      union all
      select m.id from messages m join below b on m.parent_id = b.id
    )
    select count(*) as count, bool_or(m.status = 'generating') as generating from below join messages m using (id)`.execute(trx);
  return { count: Number(rows[0]?.count ?? 0), generating: rows[0]?.generating === true };
}

/** Deletes a message; the messages below it go with it (`parent_id` cascades). */
export async function deleteMessage(trx: Transaction<DB>, id: string): Promise<void> {
  await trx.deleteFrom('messages').where('id', '=', id).execute();
}

/** Locks a conversation of the user's (its tree changes one at a time); undefined when it is not theirs. */
export function lockConversation(trx: Transaction<DB>, userId: string, id: string) {
  return trx
    .selectFrom('conversations')
    .selectAll()
    .where('owner_user_id', '=', userId)
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
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
 * Stores a pending reply to a stored user message (held for `leaseMs` from the insert) and touches
 * the conversation, in one statement; answers the user message with it, as `insertTurn` does.
 */
export async function insertReply(
  db: Database,
  conversation: { ownerUserId: string; id: string; changes: Updateable<Conversations> },
  message: MessageRow,
  reply: Insertable<Messages>,
  leaseMs: number,
) {
  const pending = await db
    .with('touched', (qb) =>
      qb
        .updateTable('conversations')
        .set(conversation.changes)
        .where('owner_user_id', '=', conversation.ownerUserId)
        .where('id', '=', conversation.id)
        .returning('id'),
    )
    .insertInto('messages')
    .values({ ...reply, locked_until: leaseEnd(leaseMs) })
    .returningAll()
    .executeTakeFirstOrThrow();
  return [message, pending] as const;
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
