import type { Database } from '../../platform/db';

export function listCapabilityRows(db: Database) {
  return db.selectFrom('capabilities').select(['name', 'enabled']).execute();
}

export async function upsertCapability(db: Database, name: string, enabled: boolean, updatedBy: string): Promise<void> {
  await db
    .insertInto('capabilities')
    .values({ name, enabled, updated_by: updatedBy, updated_at: new Date() })
    .onConflict((oc) => oc.column('name').doUpdateSet({ enabled, updated_by: updatedBy, updated_at: new Date() }))
    .execute();
}
