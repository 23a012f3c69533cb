import type { RequestInput } from '../../platform/api-types';
import { type Database, PgError, pgErrorCode } from '../../platform/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Actor, AuditService } from '../audit/service';
import * as repo from './repository';

export const GROUP_POLICY_UPDATE_ACTION = 'administration.group.model_policy.update';
export const GROUP_POLICY_DELETE_ACTION = 'administration.group.model_policy.delete';

const NO_GROUP = 'Group not found.';
const NO_POLICY = 'The group has no model policy.';

/**
 * The model policies admins give groups, on top of the deployment's (`ModelPolicyService.effective`
 * reads them for a user); every change audited in its transaction.
 */
export class GroupModelPolicyService {
  constructor(
    private readonly db: Database,
    private readonly audit: AuditService,
  ) {}

  /** The group's policy; `404` when there is no such group or it has none. */
  async get(groupId: string): Promise<repo.GroupPolicyView> {
    const found = await repo.findGroupPolicy(this.db, groupId);
    if (!found) throw errors.notFound(NO_GROUP);
    if (!found.policy) throw errors.notFound(NO_POLICY);
    return found.policy;
  }

  list(page: PageRequest) {
    return repo.groupPolicyList.page(this.db, {}, page);
  }

  /** Gives the group a policy or changes its lists (those absent keep their value); `404` for an unknown group. */
  async update(actor: Actor, input: RequestInput<'GroupModelPolicyUpdateRequest'>): Promise<repo.GroupPolicyView> {
    if (input.allow === undefined && input.block === undefined) {
      throw errors.invalidRequest('Give allow, block or both.', [{ path: '/body/allow', message: 'allow or block is required' }]);
    }
    try {
      return await this.db.transaction().execute(async (trx) => {
        await repo.upsertGroupPolicy(trx, input.groupId, {
          allow: input.allow,
          block: input.block,
          updatedBy: actor.userId,
          at: new Date(),
        });
        const { policy } = (await repo.findGroupPolicy(trx, input.groupId)) as { policy: repo.GroupPolicyView };
        await this.record(actor, GROUP_POLICY_UPDATE_ACTION, input.groupId, { allow: policy.allow, block: policy.block }, trx);
        return policy;
      });
    } catch (error) {
      // The policy's foreign key: there is no such group.
      if (pgErrorCode(error) === PgError.foreignKeyViolation) throw errors.notFound(NO_GROUP);
      throw error;
    }
  }

  /** Removes the group's policy; `404` when it has none (or there is no such group). */
  async delete(actor: Actor, groupId: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      if (!(await repo.deleteGroupPolicy(trx, groupId))) throw errors.notFound(NO_POLICY);
      await this.record(actor, GROUP_POLICY_DELETE_ACTION, groupId, {}, trx);
    });
  }

  private record(actor: Actor, action: string, groupId: string, metadata: Record<string, unknown>, trx: Database) {
    return this.audit.record(actor, { action, resourceType: 'group', resourceId: groupId, outcome: 'success', metadata }, trx);
  }
}
