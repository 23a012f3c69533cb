/** A reply's stored stream events (for clients that resume it) and the channels that announce them. */
import { sql, type Transaction } from 'kysely';
import type { Database, DB } from '../../../platform/db';

/** The channel that says a reply has new stored events (the payload is its id). */
export const EVENTS_CHANNEL = 'chat_reply_events';

/** The channel that asks the instance generating a reply to stop it (the payload is its id). */
export const STOP_CHANNEL = 'chat_reply_stop';

export interface StoredEventRow {
  seq: number;
  first_seq: number;
  event: string;
  data: unknown;
}

/** Stores a reply's events and tells the instances, in one statement. */
export async function insertEvents(db: Database, messageId: string, rows: StoredEventRow[]): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map((r) => ({
    message_id: messageId,
    seq: r.seq,
    first_seq: r.first_seq,
    event: r.event,
    data: JSON.stringify(r.data),
  }));
  await db
    .with('stored', (qb) =>
      qb
        .insertInto('reply_events')
        .values(values)
        .onConflict((oc) => oc.doNothing()),
    )
    .selectNoFrom(sql<string>`pg_notify(${EVENTS_CHANNEL}, ${messageId})`.as('notified'))
    .execute();
}

/**
 * Stores a reply's final event after those stored (an instance that did not stream it ends it:
 * the lease sweep, a stop), and tells the instances at the transaction's commit.
 */
export async function appendFinalEvent(trx: Transaction<DB>, messageId: string, event: string, data: unknown): Promise<void> {
  await sql`
    insert into reply_events (message_id, seq, first_seq, event, data)
    select ${messageId}, n, n, ${event}, ${JSON.stringify(data)}::jsonb
    from (select coalesce(max(seq), 0) + 1 as n from reply_events where message_id = ${messageId}) next
    on conflict do nothing`.execute(trx);
  await sql`select pg_notify(${EVENTS_CHANNEL}, ${messageId})`.execute(trx);
}

/** A reply's stored events after `after` (by SSE id), in order, at most `limit`. */
export function eventsAfter(db: Database, messageId: string, after: number, limit: number): Promise<StoredEventRow[]> {
  return db
    .selectFrom('reply_events')
    .select(['seq', 'first_seq', 'event', 'data'])
    .where('message_id', '=', messageId)
    .where('seq', '>', after)
    .orderBy('seq')
    .limit(limit)
    .execute();
}

/** A reply's last stored event, if any. */
export function lastEvent(db: Database, messageId: string): Promise<Pick<StoredEventRow, 'seq' | 'event'> | undefined> {
  return db
    .selectFrom('reply_events')
    .select(['seq', 'event'])
    .where('message_id', '=', messageId)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/** Removes up to `limit` stored events of replies that ended more than `graceMs` ago; returns how many. */
export async function removeEndedEvents(db: Database, graceMs: number, limit: number): Promise<number> {
  const result = await sql`
    delete from reply_events where ctid in (
      select e.ctid from reply_events e join messages m on m.id = e.message_id
      where m.status <> 'generating' and m.updated_at < now() - cast(${`${graceMs} milliseconds`} as interval)
      limit ${limit})`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
