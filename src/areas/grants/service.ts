import type { RequestInput } from '../../platform/api-types';
import type { Database } from '../../platform/db';
import type { Permission, ResourceKind } from '../../platform/db/access';
import { lockForTransaction } from '../../platform/db/locks';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { PageRequest } from '../../platform/pagination';
import type { GroupService } from '../groups/service';
import * as repo from './repository';

/** The most grants one resource holds. */
export const MAX_GRANTS_PER_RESOURCE = 500;

/** Who asks: the user, and the scopes of the access token they came in with (unset: all of them). */
export interface GrantCaller {
  userId: string;
  scopes?: readonly string[];
}

/**
 * What the caller may do with the grants of one resource: `manage` them (its owner; an admin for the
 * deployment's resources), only see the resource (`visible`: it is shared with them, 403), or
 * nothing (`none`: it does not exist for them, 404).
 */
export type Standing = 'manage' | 'visible' | 'none';

/** How one kind of resource is shared: the permissions it takes and who manages its grants. */
export interface GrantableKind {
  permissions: readonly Permission[];
  standing(caller: GrantCaller, resourceId: string): Promise<Standing>;
}

export type GrantableKinds = Partial<Record<ResourceKind, GrantableKind>>;

/**
 * Access grants, given and ended by those who manage the resource (DESIGN §21). Areas say who that
 * is for their kind; the read rule itself lives in the areas' queries (platform/db/access.ts).
 */
export class GrantService {
  constructor(
    private readonly db: Database,
    private readonly groups: GroupService,
    private readonly isAdmin: (caller: GrantCaller) => Promise<boolean>,
    private readonly kinds: GrantableKinds,
  ) {}

  async list(caller: GrantCaller, kind: ResourceKind, resourceId: string, page: PageRequest) {
    await this.requireManager(caller, kind, resourceId);
    return repo.grantList.page(this.db, { kind, resourceId }, page);
  }

  async grant(caller: GrantCaller, input: RequestInput<'GrantRequest'>): Promise<repo.GrantView> {
    const grantable = await this.requireManager(caller, input.resourceKind, input.resourceId);
    if (!grantable.permissions.includes(input.permission)) {
      throw errors.invalidRequest(`A ${input.resourceKind} is shared with ${grantable.permissions.map((p) => `"${p}"`).join(' or ')}.`, [
        { path: '/body/permission', message: `must be one of ${grantable.permissions.join(', ')}` },
      ]);
    }
    if (input.principalKind === 'user' && input.principalId === caller.userId) {
      throw errors.invalidRequest('A resource cannot be shared with oneself.', [
        { path: '/body/principalId', message: 'must not be the caller' },
      ]);
    }
    if (input.principalKind === 'group') await this.requireGroup(caller, input.principalId);
    const at = new Date();
    return this.db.transaction().execute(async (trx) => {
      // One resource's grants in turn, so that the cap holds under concurrent shares.
      await lockForTransaction(trx, `grants:${input.resourceKind}:${input.resourceId}`);
      const principal = { kind: input.principalKind, id: input.principalId };
      const full = (await repo.countGrants(trx, input.resourceKind, input.resourceId)) >= MAX_GRANTS_PER_RESOURCE;
      if (full && !(await repo.hasGrant(trx, input.resourceKind, input.resourceId, principal))) {
        throw errors.conflict(`A resource is shared with at most ${MAX_GRANTS_PER_RESOURCE} users and groups.`);
      }
      return repo.upsertGrant(trx, {
        id: uuidv7(at.getTime()),
        kind: input.resourceKind,
        resourceId: input.resourceId,
        principalKind: input.principalKind,
        principalId: input.principalId,
        permission: input.permission,
        grantedBy: caller.userId,
        at,
      });
    });
  }

  /** Ends a grant: its resource's managers end any, a user the ones made to them. */
  async revoke(caller: GrantCaller, grantId: string): Promise<void> {
    const grant = await repo.findGrant(this.db, grantId);
    if (!grant) throw errors.notFound('Grant not found.');
    const kind = grant.resource_kind as ResourceKind;
    const own = grant.principal_kind === 'user' && grant.principal_id === caller.userId;
    if (!own) {
      const standing = await this.standing(caller, kind, grant.resource_id);
      // A grant to a group of the caller is no reason to show it: only the resource's managers see it.
      if (standing === 'none') throw errors.notFound('Grant not found.');
      if (standing === 'visible') throw errors.forbidden('Only those who share this resource can end its grants.');
    }
    if (!(await repo.deleteGrant(this.db, grantId))) throw errors.notFound('Grant not found.');
  }

  private async standing(caller: GrantCaller, kind: ResourceKind, resourceId: string): Promise<Standing> {
    const grantable = this.kinds[kind];
    return grantable ? grantable.standing(caller, resourceId) : 'none';
  }

  private async requireManager(caller: GrantCaller, kind: ResourceKind, resourceId: string): Promise<GrantableKind> {
    const grantable = this.kinds[kind];
    const standing = grantable ? await grantable.standing(caller, resourceId) : 'none';
    if (!grantable || standing === 'none') throw errors.notFound(`No ${kind} ${resourceId} to share.`);
    if (standing === 'visible') throw errors.forbidden(`This ${kind} is shared with you: only its owner can share it.`);
    return grantable;
  }

  /** A group to share with: it exists, and the caller is in it unless they are an admin. */
  private async requireGroup(caller: GrantCaller, groupId: string): Promise<void> {
    const { exists, member } = await this.groups.membership(groupId, caller.userId);
    if (!exists || (!member && !(await this.isAdmin(caller)))) throw errors.referenceNotFound('principalId', 'Group not found.');
  }
}
