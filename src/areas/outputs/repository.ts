import type { Insertable } from 'kysely';
import type { Outputs } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { listQuery } from '../../platform/db/list-query';

export function findOutput(db: Database, ownerUserId: string, id: string) {
  return db.selectFrom('outputs').selectAll().where('owner_user_id', '=', ownerUserId).where('id', '=', id).executeTakeFirst();
}

/** The owner's outputs, filtered; read a page at a time. */
export const outputList = listQuery({
  id: 'id',
  rows: (db, { ownerUserId, type, conversationId, automationId }: { ownerUserId: string; type?: string; conversationId?: string; automationId?: string }) => {
    let query = db.selectFrom('outputs').selectAll().where('owner_user_id', '=', ownerUserId);
    if (type !== undefined) query = query.where('type', '=', type);
    if (conversationId !== undefined) query = query.where('conversation_id', '=', conversationId);
    if (automationId !== undefined) query = query.where('automation_id', '=', automationId);
    return query;
  },
});

export function insertOutput(db: Database, row: Insertable<Outputs>) {
  return db.insertInto('outputs').values(row).returningAll().executeTakeFirstOrThrow();
}

export function deleteOutput(db: Database, ownerUserId: string, id: string) {
  return db.deleteFrom('outputs').where('owner_user_id', '=', ownerUserId).where('id', '=', id).returningAll().executeTakeFirst();
}
