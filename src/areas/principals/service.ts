import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { AdministrativePrincipals } from '../../../generated/db';
import { errors } from '../../platform/errors';
import type { Database } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import type { Actor, AuditService } from '../audit/service';
import * as repo from './repository';

export type Role = components['schemas']['Role'];
export type PrincipalRow = Selectable<AdministrativePrincipals>;

export const GRANT_ACTION = 'administration.principal.grant';
export const REVOKE_ACTION = 'administration.principal.revoke';
const RESOURCE_TYPE = 'administrative_principal';

/** What a refused call is recorded with. */
export interface RefusedCall {
  action: string;
  resourceType: string;
  operationId: string;
  method: string;
  path: string;
}

/** Administrative roles: who holds which, granting and revoking them, and checking them. */
export class PrincipalService {
  constructor(
    private readonly db: Database,
    private readonly audit: AuditService,
  ) {}

  /**
   * Passes when `actor` holds one of `roles`; otherwise records exactly one `denied` audit event
   * and throws 403.
   */
  async authorize(actor: Actor, roles: readonly Role[], call: RefusedCall): Promise<void> {
    const held = (await repo.rolesOf(this.db, actor.userId)).map((r) => r.role);
    if (held.some((role) => (roles as readonly string[]).includes(role))) return;
    await this.audit.record(actor, {
      action: call.action,
      resourceType: call.resourceType,
      outcome: 'denied',
      metadata: { operationId: call.operationId, method: call.method, path: call.path, requiredRoles: roles, heldRoles: held },
    });
    throw errors.forbidden(`This operation requires one of the roles ${roles.join(', ')}.`);
  }

  /** The administrative roles `userId` holds, in a fixed order. */
  async roles(userId: string): Promise<Role[]> {
    return (await repo.rolesOf(this.db, userId)).map((r) => r.role as Role).sort();
  }

  list(): Promise<PrincipalRow[]> {
    return repo.listPrincipals(this.db);
  }

  /** Grants the role (audited in the same transaction); a role already held is returned unchanged. */
  async grant(actor: Actor, grant: { userId: string; role: Role; reason: string }): Promise<PrincipalRow> {
    return this.db.transaction().execute(async (trx) => {
      const inserted = await repo.insertPrincipal(trx, { ...grant, grantedBy: actor.userId });
      const principal = inserted ?? (await repo.findPrincipals(trx, grant.userId, grant.role))[0];
      if (!principal) throw new Error('grant neither inserted nor found');
      await this.audit.record(
        actor,
        {
          action: GRANT_ACTION,
          resourceType: RESOURCE_TYPE,
          resourceId: grant.userId,
          outcome: 'success',
          metadata: { role: grant.role, reason: grant.reason, alreadyHeld: !inserted },
        },
        trx,
      );
      return principal;
    });
  }

  /** Revokes one role or all roles of a user, never the last admin (audited in the same transaction). */
  async revoke(actor: Actor, target: { userId: string; role?: Role }): Promise<Role[]> {
    return this.db.transaction().execute(async (trx) => {
      await lockForTransaction(trx, 'administrative_principals'); // the last-admin rule
      const held = await repo.findPrincipals(trx, target.userId, target.role);
      if (held.length === 0) {
        throw errors.principalNotFound(
          target.role ? `${target.userId} does not hold the role ${target.role}.` : `${target.userId} holds no administrative role.`,
        );
      }
      const roles = held.map((p) => p.role as Role);
      if (roles.includes('admin') && (await repo.countAdmins(trx)) <= 1) {
        throw errors.conflict('The last admin cannot be revoked: grant admin to someone else first.');
      }
      await repo.deletePrincipals(trx, target.userId, roles);
      await this.audit.record(
        actor,
        { action: REVOKE_ACTION, resourceType: RESOURCE_TYPE, resourceId: target.userId, outcome: 'success', metadata: { roles } },
        trx,
      );
      return roles;
    });
  }

  /** Makes each user an admin unless they already are (start-up's BOOTSTRAP_ADMIN_USER_IDS, `make admin`). */
  async ensureRole(actor: Actor, userIds: readonly string[], role: Role, reason: string): Promise<string[]> {
    const granted: string[] = [];
    for (const userId of userIds) {
      const held = (await repo.rolesOf(this.db, userId)).some((r) => r.role === role);
      if (held) continue;
      await this.grant(actor, { userId, role, reason });
      granted.push(userId);
    }
    return granted;
  }
}
