import { type Insertable, sql } from 'kysely';
import type { MemoryItems } from '../../../generated/db';
import type { Database } from '../../platform/db';
import type { ListedRecord } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';
import { anyWord } from '../../platform/db/text-search';

export const { find: findMemoryItem, update: updateMemoryItem, remove: deleteMemoryItem } = ownedRecords('memory_items');

export function findMemoryItemByContentKey(db: Database, ownerUserId: string, contentKey: string) {
  return db
    .selectFrom('memory_items')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('content_key', '=', contentKey)
    .executeTakeFirst();
}

/** The owner's memory items, filtered; read a page at a time (not their keys or search vectors). */
export const memoryItemList = ownedList('memory_items', {
  fields: ['kind', 'content', 'project_id', 'source', 'source_ref'],
  times: ['created_at', 'updated_at'],
  filters: { kind: 'kind', projectId: 'project_id' },
  closed: ['kind'],
});
export type MemoryView = ListedRecord<'memory_items', typeof memoryItemList>;

/** Inserts the item; when the user already has one with the same content key, inserts nothing. */
export function insertMemoryItem(db: Database, row: Insertable<MemoryItems>) {
  return db
    .insertInto('memory_items')
    .values(row)
    .onConflict((oc) => oc.columns(['owner_user_id', 'content_key']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

/**
 * The user's memory items sharing the most words with `text` (full-text rank), global ones and
 * those of `projectId`: what the assistant is told about the user for a message.
 */
export async function relevantMemoryItems(db: Database, ownerUserId: string, projectId: string | null, text: string, limit: number) {
  const query = anyWord(text);
  return db
    .selectFrom('memory_items')
    .select(['id', 'content'])
    .where('owner_user_id', '=', ownerUserId)
    .where((eb) =>
      projectId === null ? eb('project_id', 'is', null) : eb.or([eb('project_id', 'is', null), eb('project_id', '=', projectId)]),
    )
    .where(sql<boolean>`tsv @@ ${query}`)
    .orderBy(sql`ts_rank_cd(tsv, ${query})`, 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
}
