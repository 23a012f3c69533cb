import type { RequestInput } from '../../platform/api-types';
import { type Database, PgError, pgErrorCode } from '../../platform/db';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { PageRequest } from '../../platform/pagination';
import type { Actor, AuditService } from '../audit/service';
import * as repo from './repository';

const RESOURCE_TYPE = 'group';

/** Runs a write whose only expected failure is another group's name (unique without case). */
async function withUniqueName<T>(name: string | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (pgErrorCode(error) === PgError.uniqueViolation) throw errors.conflict(`A group named "${name ?? ''}" exists already.`);
    throw error;
  }
}

/** The deployment's groups and their members, managed by admins; every change audited in its transaction. */
export class GroupService {
  constructor(
    private readonly db: Database,
    private readonly audit: AuditService,
  ) {}

  async get(groupId: string): Promise<repo.GroupView> {
    const group = await repo.findGroup(this.db, groupId);
    if (!group) throw errors.notFound('Group not found.');
    return group;
  }

  list(page: PageRequest) {
    return repo.groupList.page(this.db, {}, page);
  }

  async create(actor: Actor, input: RequestInput<'GroupCreateRequest'>): Promise<repo.GroupView> {
    const at = new Date();
    const id = uuidv7(at.getTime());
    const name = input.name.trim();
    const description = input.description ?? '';
    return withUniqueName(name, () =>
      this.db.transaction().execute(async (trx) => {
        await repo.insertGroup(trx, { id, name, description, at });
        await this.record(actor, 'administration.group.create', id, { name, description }, trx);
        return (await repo.findGroup(trx, id)) as repo.GroupView;
      }),
    );
  }

  async update(actor: Actor, input: RequestInput<'GroupUpdateRequest'>): Promise<repo.GroupView> {
    const name = input.name?.trim();
    return withUniqueName(name, () =>
      this.db.transaction().execute(async (trx) => {
        if (!(await repo.updateGroup(trx, input.groupId, { name, description: input.description, at: new Date() }))) {
          throw errors.notFound('Group not found.');
        }
        await this.record(
          actor,
          'administration.group.update',
          input.groupId,
          { name: name ?? null, description: input.description ?? null },
          trx,
        );
        return (await repo.findGroup(trx, input.groupId)) as repo.GroupView;
      }),
    );
  }

  async delete(actor: Actor, groupId: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const group = await repo.findGroup(trx, groupId);
      if (!group || !(await repo.deleteGroup(trx, groupId))) throw errors.notFound('Group not found.');
      await this.record(actor, 'administration.group.delete', groupId, { name: group.name, memberCount: group.member_count }, trx);
    });
  }

  /** The groups `userId` is in (their own view: no member counts). */
  memberships(userId: string, page: PageRequest) {
    return repo.membershipList.page(this.db, { userId }, page);
  }

  /** Whether the group exists, and whether `userId` is in it. */
  async membership(groupId: string, userId: string): Promise<{ exists: boolean; member: boolean }> {
    const [group, member] = await Promise.all([repo.findGroup(this.db, groupId), repo.isMember(this.db, groupId, userId)]);
    return { exists: group !== undefined, member };
  }

  async members(groupId: string, page: PageRequest) {
    await this.get(groupId);
    return repo.memberList.page(this.db, { groupId }, page);
  }

  /** Adds and removes members under the group's lock, so that concurrent changes count right; the member count after. */
  async changeMembers(actor: Actor, input: RequestInput<'GroupMembersUpdateRequest'>): Promise<number> {
    const add = input.add ?? [];
    const remove = input.remove ?? [];
    const both = add.filter((userId) => remove.includes(userId));
    if (both.length > 0) {
      throw errors.invalidRequest(`A user cannot be both added and removed: ${both.join(', ')}.`, [
        { path: '/body/remove', message: 'names a user that add names too' },
      ]);
    }
    return this.db.transaction().execute(async (trx) => {
      if (!(await repo.lockGroup(trx, input.groupId))) throw errors.notFound('Group not found.');
      await repo.addMembers(trx, input.groupId, add, new Date());
      await repo.removeMembers(trx, input.groupId, remove);
      const memberCount = await repo.countMembers(trx, input.groupId);
      await this.record(actor, 'administration.group.members.update', input.groupId, { add, remove, memberCount }, trx);
      return memberCount;
    });
  }

  private record(actor: Actor, action: string, groupId: string, metadata: Record<string, unknown>, trx: Database) {
    return this.audit.record(actor, { action, resourceType: RESOURCE_TYPE, resourceId: groupId, outcome: 'success', metadata }, trx);
  }
}
