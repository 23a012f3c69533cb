import type { Schemas } from '../../platform/api-types';
import { millis } from '../../platform/db/timestamps';
import type { GrantView } from './repository';

export function presentGrant(row: GrantView): Schemas['Grant'] {
  return {
    grantId: row.id,
    resourceKind: row.resource_kind as Schemas['GrantResourceKind'],
    resourceId: row.resource_id,
    principalKind: row.principal_kind as Schemas['GrantPrincipalKind'],
    principalId: row.principal_id,
    permission: row.permission as Schemas['GrantPermission'],
    grantedBy: row.granted_by,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}
