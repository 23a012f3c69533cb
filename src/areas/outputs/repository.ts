import type { Insertable, Selectable } from 'kysely';
import type { Outputs } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { listQuery } from '../../platform/db/list-query';
import { ownedRecords } from '../../platform/db/owned';
import { epochMs, type Instants } from '../../platform/db/timestamps';

export const { find: findOutput } = ownedRecords('outputs');

/** What an output is presented with: the list reads only these (not its storage key), and its time as epoch milliseconds. */
const OUTPUT_FIELDS = [
  'id',
  'type',
  'name',
  'mime_type',
  'size_bytes',
  'sha256',
  'conversation_id',
  'automation_id',
  'origin',
  'generation_id',
  'project_id',
  'prompt',
  'model',
  'connection_id',
  'source_file_id',
] as const;
export type OutputView = Instants<Pick<Selectable<Outputs>, (typeof OUTPUT_FIELDS)[number] | 'created_at'>>;

/** The owner's outputs, filtered; read a page at a time. */
export const outputList = listQuery({
  id: 'id',
  rows: (
    db,
    filter: { ownerUserId: string; type?: string; origin?: string; conversationId?: string; automationId?: string; projectId?: string; generationId?: string },
  ) => {
    let query = db.selectFrom('outputs').select([...OUTPUT_FIELDS, epochMs('created_at')]).where('owner_user_id', '=', filter.ownerUserId);
    if (filter.type !== undefined) query = query.where('type', '=', filter.type);
    if (filter.origin !== undefined) query = query.where('origin', '=', filter.origin);
    if (filter.conversationId !== undefined) query = query.where('conversation_id', '=', filter.conversationId);
    if (filter.automationId !== undefined) query = query.where('automation_id', '=', filter.automationId);
    if (filter.projectId !== undefined) query = query.where('project_id', '=', filter.projectId);
    if (filter.generationId !== undefined) query = query.where('generation_id', '=', filter.generationId);
    return query;
  },
});

export function insertOutput(db: Database, row: Insertable<Outputs>) {
  return db.insertInto('outputs').values(row).returningAll().executeTakeFirstOrThrow();
}

export function deleteOutput(db: Database, ownerUserId: string, id: string) {
  return db.deleteFrom('outputs').where('owner_user_id', '=', ownerUserId).where('id', '=', id).returningAll().executeTakeFirst();
}
