import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { AdministrativePrincipals } from '../../../generated/db';

type Principal = components['schemas']['Principal'];

export function presentPrincipal(row: Selectable<AdministrativePrincipals>): Principal {
  return {
    userId: row.user_id,
    role: row.role as Principal['role'],
    reason: row.reason,
    grantedBy: row.granted_by,
    createdAt: row.created_at.getTime(),
  };
}
