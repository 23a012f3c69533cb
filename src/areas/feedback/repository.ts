import { type Insertable, type Selectable, sql, type Transaction } from 'kysely';
import type { MessageFeedback } from '../../../generated/db';
import type { Database, DB } from '../../platform/db';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { epochMs } from '../../platform/db/timestamps';

export type FeedbackRow = Selectable<MessageFeedback>;

/**
 * Gives or changes a user's feedback on a message (one per user and message): a second one keeps
 * the first's id and creation time and replaces the rest.
 */
export function upsertFeedback(trx: Transaction<DB>, row: Insertable<MessageFeedback> & { updated_at: Date }) {
  return trx
    .insertInto('message_feedback')
    .values(row)
    .onConflict((oc) =>
      oc.columns(['message_id', 'user_id']).doUpdateSet({
        rating: row.rating,
        reason: row.reason ?? null,
        comment: row.comment ?? null,
        updated_at: row.updated_at,
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Removes a user's feedback on a message; whether there was one. */
export async function deleteFeedback(db: Database, userId: string, messageId: string): Promise<boolean> {
  const result = await db
    .deleteFrom('message_feedback')
    .where('message_id', '=', messageId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** A user's feedback in one conversation; read a page at a time. */
export const conversationFeedbackList = listQuery({
  id: 'id',
  rows: (db, { userId, conversationId }: { userId: string; conversationId: string }) =>
    db
      .selectFrom('message_feedback')
      .select(['id', 'message_id', 'conversation_id', 'rating', 'reason', 'comment', epochMs('created_at'), epochMs('updated_at')])
      .where('user_id', '=', userId)
      .where('conversation_id', '=', conversationId),
});
export type FeedbackView = ListedRecord<FeedbackRow, typeof conversationFeedbackList>;

/** Everyone's feedback, optionally of one rating, each with its reply's model and usage; read a page at a time. */
export const adminFeedbackList = listQuery({
  id: 'f.id',
  rows: (db, { rating }: { rating?: 'up' | 'down' }) =>
    db
      .selectFrom('message_feedback as f')
      .innerJoin('messages as m', 'm.id', 'f.message_id')
      .select([
        'f.id',
        'f.user_id',
        'f.conversation_id',
        'f.message_id',
        'f.rating',
        'f.reason',
        'f.comment',
        'm.model',
        'm.input_tokens',
        'm.output_tokens',
        'm.cost_micro_cents',
        epochMs('f.created_at'),
        epochMs('f.updated_at'),
      ])
      // A closed set, written into the statement as ownedList does.
      .$if(rating !== undefined, (q) => q.where('f.rating', '=', sql.lit(rating as 'up' | 'down'))),
});
export type AdminFeedbackView = ListedRecord<
  FeedbackRow & Pick<Selectable<DB['messages']>, 'model' | 'input_tokens' | 'output_tokens' | 'cost_micro_cents'>,
  typeof adminFeedbackList
>;
