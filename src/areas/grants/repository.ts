import type { Database } from '../../platform/db';
import type { Permission, PrincipalKind, ResourceKind } from '../../platform/db/access';
import { listQuery } from '../../platform/db/list-query';
import { epochMs } from '../../platform/db/timestamps';

const GRANT_FIELDS = ['id', 'resource_kind', 'resource_id', 'principal_kind', 'principal_id', 'permission', 'granted_by'] as const;

function grants(db: Database) {
  return db.selectFrom('access_grants').select([...GRANT_FIELDS, epochMs('created_at'), epochMs('updated_at')]);
}

/** The grants on one resource, newest first; read a page at a time. */
export const grantList = listQuery({
  id: 'id',
  rows: (db, { kind, resourceId }: { kind: ResourceKind; resourceId: string }) =>
    grants(db).where('resource_kind', '=', kind).where('resource_id', '=', resourceId),
});
export type GrantView = Awaited<ReturnType<typeof grantList.page>>['items'][number];

export function findGrant(db: Database, id: string): Promise<GrantView | undefined> {
  return grants(db).where('id', '=', id).executeTakeFirst();
}

/** Whether the principal holds a grant on the resource. */
export async function hasGrant(db: Database, kind: ResourceKind, resourceId: string, principal: { kind: PrincipalKind; id: string }) {
  const row = await db
    .selectFrom('access_grants')
    .select('id')
    .where('resource_kind', '=', kind)
    .where('resource_id', '=', resourceId)
    .where('principal_kind', '=', principal.kind)
    .where('principal_id', '=', principal.id)
    .executeTakeFirst();
  return row !== undefined;
}

export async function countGrants(db: Database, kind: ResourceKind, resourceId: string): Promise<number> {
  const row = await db
    .selectFrom('access_grants')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('resource_kind', '=', kind)
    .where('resource_id', '=', resourceId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export interface GrantWrite {
  id: string;
  kind: ResourceKind;
  resourceId: string;
  principalKind: PrincipalKind;
  principalId: string;
  permission: Permission;
  grantedBy: string;
  at: Date;
}

/** Gives the grant, or changes the permission of the one the principal holds on the resource; the grant after. */
export async function upsertGrant(db: Database, grant: GrantWrite): Promise<GrantView> {
  const { id } = await db
    .insertInto('access_grants')
    .values({
      id: grant.id,
      resource_kind: grant.kind,
      resource_id: grant.resourceId,
      principal_kind: grant.principalKind,
      principal_id: grant.principalId,
      permission: grant.permission,
      granted_by: grant.grantedBy,
      created_at: grant.at,
      updated_at: grant.at,
    })
    .onConflict((oc) =>
      oc
        .columns(['resource_kind', 'resource_id', 'principal_kind', 'principal_id'])
        .doUpdateSet({ permission: grant.permission, granted_by: grant.grantedBy, updated_at: grant.at }),
    )
    .returning('id')
    .executeTakeFirstOrThrow();
  return (await findGrant(db, id)) as GrantView;
}

/** Whether the grant existed (now deleted). */
export async function deleteGrant(db: Database, id: string): Promise<boolean> {
  const result = await db.deleteFrom('access_grants').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
