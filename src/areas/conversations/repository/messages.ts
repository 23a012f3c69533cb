/** Messages as they are read and written one at a time, and a conversation's messages a page at a time. */
import { type Insertable, type Selectable } from 'kysely';
import type { Messages } from '../../../../generated/db';
import type { Database } from '../../../platform/db';
import { type ListedRecord, listQuery } from '../../../platform/db/list-query';
import { epochMs } from '../../../platform/db/timestamps';

export type MessageRow = Selectable<Messages>;

/** What a message is presented with: the list reads only these, and its times as epoch milliseconds. */
export const MESSAGE_FIELDS = [
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

/** A message of one of the user's conversations. */
export function findOwnedMessage(db: Database, userId: string, id: string) {
  return db.selectFrom('messages').selectAll().where('owner_user_id', '=', userId).where('id', '=', id).executeTakeFirst();
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
