/** The tree of a conversation's messages: its branches, walked up or down, siblings and subtrees. */
import { sql, type Transaction } from 'kysely';
import type { Database, DB } from '../../../platform/db';
import { type PageRequest, toPage } from '../../../platform/pagination';
import { epochMs } from '../../../platform/db/timestamps';
import { MESSAGE_FIELDS } from './messages';

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
