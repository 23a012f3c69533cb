import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Messages form a tree: each has the message it follows (`parent_id`, null for a first message);
 * deleting a message deletes the messages below it. A conversation shows one branch, the one that
 * ends at `current_leaf_id`. A conversation written before is one branch, in the order it was
 * written, ending at its newest message.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table messages add column parent_id text references messages (id) on delete cascade`.execute(db);
  await sql`
    update messages m set parent_id = ordered.previous
    from (select id, lag(id) over (partition by conversation_id order by id) as previous from messages) ordered
    where m.id = ordered.id and ordered.previous is not null
  `.execute(db);
  // The children of a message, oldest first, and a conversation's first messages.
  await sql`create index messages_parent_idx on messages (parent_id, id)`.execute(db);
  await sql`create index messages_roots_idx on messages (conversation_id, id) where parent_id is null`.execute(db);

  await sql`alter table conversations add column current_leaf_id text references messages (id) on delete set null`.execute(db);
  await sql`
    update conversations c set current_leaf_id = newest.id
    from (select conversation_id, max(id) as id from messages group by conversation_id) newest
    where c.id = newest.conversation_id
  `.execute(db);
  // Deleting messages (a subtree, a conversation) finds what refers to them by these.
  await sql`create index conversations_current_leaf_idx on conversations (current_leaf_id)`.execute(db);
  await sql`create index tool_approvals_message_idx on tool_approvals (message_id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists tool_approvals_message_idx`.execute(db);
  await sql`alter table conversations drop column current_leaf_id`.execute(db);
  await sql`drop index if exists messages_roots_idx`.execute(db);
  await sql`drop index if exists messages_parent_idx`.execute(db);
  await sql`alter table messages drop column parent_id`.execute(db);
}
