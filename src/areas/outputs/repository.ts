import type { Insertable } from 'kysely';
import type { Outputs } from '../../../generated/db';
import type { Database } from '../../platform/db';
import type { ListedRecord } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';

export const { find: findOutput } = ownedRecords('outputs');

/** The owner's outputs, filtered; read a page at a time (not their storage keys). */
export const outputList = ownedList('outputs', {
  fields: [
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
  ],
  times: ['created_at'],
  filters: {
    type: 'type',
    origin: 'origin',
    conversationId: 'conversation_id',
    automationId: 'automation_id',
    projectId: 'project_id',
    generationId: 'generation_id',
  },
  closed: ['type', 'origin'],
});
export type OutputView = ListedRecord<'outputs', typeof outputList>;

export function insertOutput(db: Database, row: Insertable<Outputs>) {
  return db.insertInto('outputs').values(row).returningAll().executeTakeFirstOrThrow();
}

export function deleteOutput(db: Database, ownerUserId: string, id: string) {
  return db.deleteFrom('outputs').where('owner_user_id', '=', ownerUserId).where('id', '=', id).returningAll().executeTakeFirst();
}
