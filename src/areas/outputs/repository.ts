import type { Insertable } from 'kysely';
import type { Outputs } from '../../../generated/db';
import type { PageRequest } from '../../platform/pagination';
import type { Database } from '../../platform/db';

export function findOutput(db: Database, ownerUserId: string, id: string) {
  return db.selectFrom('outputs').selectAll().where('owner_user_id', '=', ownerUserId).where('id', '=', id).executeTakeFirst();
}

export function listOutputs(
  db: Database,
  ownerUserId: string,
  filter: { type?: string; conversationId?: string; automationId?: string },
  page: PageRequest,
) {
  let query = db.selectFrom('outputs').selectAll().where('owner_user_id', '=', ownerUserId);
  if (filter.type !== undefined) query = query.where('type', '=', filter.type);
  if (filter.conversationId !== undefined) query = query.where('conversation_id', '=', filter.conversationId);
  if (filter.automationId !== undefined) query = query.where('automation_id', '=', filter.automationId);
  if (page.beforeId !== null) query = query.where('id', '<', page.beforeId);
  return query.orderBy('id', 'desc').limit(page.limit + 1).execute();
}

export function insertOutput(db: Database, row: Insertable<Outputs>) {
  return db.insertInto('outputs').values(row).returningAll().executeTakeFirstOrThrow();
}

export function deleteOutput(db: Database, ownerUserId: string, id: string) {
  return db.deleteFrom('outputs').where('owner_user_id', '=', ownerUserId).where('id', '=', id).returningAll().executeTakeFirst();
}
