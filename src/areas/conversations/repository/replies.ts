/** Replies being generated: stored with their turn, held by leases, ended, paused, resumed and stopped. */
import { type Insertable, type InsertObject, sql, type Transaction, type Updateable } from 'kysely';
import type { Conversations, Messages } from '../../../../generated/db';
import type { Database, DB } from '../../../platform/db';
import type { MessageRow } from './messages';
import { STOP_CHANNEL } from './events';

/**
 * The end of a reply's lease `ms` from now, on the database's clock: the instance that writes a
 * lease and the one that sweeps it compare times on one clock, whatever their own clocks or how
 * long the writing instance waited before its statement ran.
 */
const leaseEnd = (ms: number) => sql<Date>`now() + cast(${`${ms} milliseconds`} as interval)`;

type Touched = { ownerUserId: string; id: string; changes: Updateable<Conversations> };

/** Inserts `rows` and applies `changes` to their conversation, in one statement. */
function insertTouching(db: Database, conversation: Touched, rows: Array<InsertObject<DB, 'messages'>>) {
  return db
    .with('touched', (qb) =>
      qb
        .updateTable('conversations')
        .set(conversation.changes)
        .where('owner_user_id', '=', conversation.ownerUserId)
        .where('id', '=', conversation.id)
        .returning('id'),
    )
    .insertInto('messages')
    .values(rows)
    .returningAll()
    .execute();
}

/**
 * Stores a turn's message and its pending reply (held for `leaseMs` from the insert) and touches
 * the conversation, in one statement (atomic as a transaction would be, in one round trip instead of five).
 */
export async function insertTurn(
  db: Database,
  conversation: Touched,
  message: Insertable<Messages>,
  reply: Insertable<Messages>,
  leaseMs: number,
) {
  const rows = await insertTouching(db, conversation, [message, { ...reply, locked_until: leaseEnd(leaseMs) }]);
  const stored = rows.find((row) => row.id === message.id);
  const pending = rows.find((row) => row.id === reply.id);
  if (!stored || !pending) throw new Error("the turn's messages were not stored");
  return [stored, pending] as const;
}

/**
 * Stores a pending reply to a stored user message (held for `leaseMs` from the insert) and touches
 * the conversation, in one statement; answers the user message with it, as `insertTurn` does.
 */
export async function insertReply(db: Database, conversation: Touched, message: MessageRow, reply: Insertable<Messages>, leaseMs: number) {
  const [pending] = await insertTouching(db, conversation, [{ ...reply, locked_until: leaseEnd(leaseMs) }]);
  if (!pending) throw new Error('the reply was not stored');
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

/**
 * Extends the leases of these replies to `leaseMs` from now, while they are still being generated;
 * returns the ids of those whose stop was asked for (read here when the notification was missed).
 */
export async function renewReplyLeases(db: Database, ids: string[], leaseMs: number): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .updateTable('messages')
    .set({ locked_until: leaseEnd(leaseMs) })
    .where('id', 'in', ids)
    .where('status', '=', 'generating')
    .returning(['id', 'stop_requested_at'])
    .execute();
  return rows.filter((r) => r.stop_requested_at !== null).map((r) => r.id);
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

/** The caller's reply `messageId` (an assistant message), with whether it ended more than `settledMs` ago. */
export function findOwnedReply(db: Database, userId: string, messageId: string, settledMs: number) {
  return db
    .selectFrom('messages')
    .selectAll()
    .select(sql<boolean>`updated_at < now() - cast(${`${settledMs} milliseconds`} as interval)`.as('settled'))
    .where('id', '=', messageId)
    .where('owner_user_id', '=', userId)
    .where('role', '=', 'assistant')
    .executeTakeFirst();
}

/** Asks for the caller's reply to stop, while it is generating; undefined otherwise. */
export function requestStop(db: Database, userId: string, messageId: string) {
  return db
    .with('asked', (qb) =>
      qb
        .updateTable('messages')
        .set({ stop_requested_at: sql`coalesce(stop_requested_at, now())` })
        .where('id', '=', messageId)
        .where('owner_user_id', '=', userId)
        .where('status', '=', 'generating')
        .returning('id'),
    )
    .selectFrom('asked')
    .select(['asked.id', sql<string>`pg_notify(${STOP_CHANNEL}, asked.id)`.as('notified')])
    .executeTakeFirst();
}

/**
 * Ends as `stopped` up to `limit` replies whose stop was asked for and whose instance is gone (their
 * lease ran out on the database's clock), or with `ids` these of them only; one statement, so of
 * several instances one ends each. Returns the replies ended.
 */
export function stopLapsedReplies(trx: Transaction<DB>, limit: number, ids?: string[]) {
  const picked = trx
    .selectFrom('messages')
    .select('id')
    .where('status', '=', 'generating')
    .where('stop_requested_at', 'is not', null)
    .where('locked_until', '<', sql<Date>`now()`)
    .$call((q) => (ids ? q.where('id', 'in', ids) : q))
    .limit(limit)
    .forUpdate()
    .skipLocked();
  return trx
    .updateTable('messages')
    .set({ status: 'stopped', locked_until: null, updated_at: new Date() })
    .where('id', 'in', picked)
    .where('status', '=', 'generating')
    .returningAll()
    .execute();
}
