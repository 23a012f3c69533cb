import { type Insertable, sql } from 'kysely';
import type { AuditEvents } from '../../../generated/db';
import type { Database } from '../../platform/db';

export interface AuditFilter {
  action?: string;
  actorUserId?: string;
  resourceType?: string;
}

export async function insertAuditEvent(db: Database, row: Insertable<AuditEvents>): Promise<void> {
  await db.insertInto('audit_events').values(row).execute();
}

/** Events matching the filter, newest first, older than `beforeId` when given. */
export function listAuditEvents(db: Database, filter: AuditFilter, beforeId: string | null, limit: number) {
  let query = db.selectFrom('audit_events').selectAll();
  if (filter.action !== undefined) query = query.where('action', '=', catalogName(filter.action));
  if (filter.actorUserId !== undefined) query = query.where('actor_user_id', '=', filter.actorUserId);
  if (filter.resourceType !== undefined) query = query.where('resource_type', '=', catalogName(filter.resourceType));
  if (beforeId !== null) query = query.where('id', '<', beforeId);
  return query.orderBy('id', 'desc').limit(limit).execute();
}

/**
 * An action or a resource type, names of the service's own small catalog (a few dozen, some
 * written once a year): written into the statement, so that a plan prepared once for every value
 * (a generic plan) still knows which it reads, as ownedList does for its closed sets. Only a name
 * of the catalog's form is written in; anything else (which names no event) stays a parameter.
 */
function catalogName(value: string) {
  return /^[\w.:-]+$/.test(value) ? sql.lit(value) : value;
}
