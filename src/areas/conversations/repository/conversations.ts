/** The conversations' records: read, listed, created, renamed, locked, and the temporary ones swept. */
import { type Insertable, type Selectable, type Transaction } from 'kysely';
import type { Conversations } from '../../../../generated/db';
import type { Database, DB } from '../../../platform/db';
import { type ListedRecord } from '../../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../../platform/db/owned';

export type ConversationRow = Selectable<Conversations>;

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
