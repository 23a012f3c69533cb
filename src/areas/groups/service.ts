import { createHash } from 'node:crypto';
import type { RequestInput } from '../../platform/api-types';
import { type Database, PgError, pgErrorCode } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { PageRequest } from '../../platform/pagination';
import type { Actor, AuditService } from '../audit/service';
import * as repo from './repository';

const RESOURCE_TYPE = 'group';

export const CLAIM_SYNC_ACTION = 'group.identity_provider.sync';

/** The most group names one token's claim is taken for; names past it are left out. */
const MAX_CLAIM_GROUPS = 100;
const MAX_NAME_LENGTH = 100;

/**
 * The group names a groups claim carries (an array of names, or one name): trimmed, without
 * blanks, over-long names and other values, one per name without case, sorted.
 */
export function claimGroupNames(claim: unknown): string[] {
  const values = Array.isArray(claim) ? claim : claim === undefined || claim === null ? [] : [claim];
  const names = new Map<string, string>();
  for (const value of values) {
    if (typeof value !== 'string') continue;
    const name = value.trim();
    if (name === '' || name.length > MAX_NAME_LENGTH || names.has(name.toLowerCase())) continue;
    names.set(name.toLowerCase(), name);
  }
  return [...names.values()].sort().slice(0, MAX_CLAIM_GROUPS);
}

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

  /**
   * Matches the user's `identity_provider` memberships to the groups claim of a token that just
   * verified (`claimGroupNames`): groups missing by name are made, memberships added and removed;
   * manual memberships stay. Writes only when the claim differs from the one matched last (its
   * hash is kept per user), so a membership an admin removes by hand stays removed until the
   * claim changes. Changes are audited.
   */
  async syncClaim(userId: string, claim: unknown): Promise<void> {
    const names = claimGroupNames(claim);
    const hash = createHash('sha256').update(JSON.stringify(names)).digest('base64url');
    if ((await repo.claimHashOf(this.db, userId)) === hash) return;
    await this.db.transaction().execute(async (trx) => {
      // One sync per user at a time (two requests with a new token at once).
      await lockForTransaction(trx, `group-claims:${userId}`);
      if ((await repo.claimHashOf(trx, userId)) === hash) return;
      const at = new Date();
      const groupIds = await repo.ensureGroupsNamed(trx, names, at);
      const changed = await repo.matchClaimMemberships(trx, userId, groupIds, at);
      await repo.saveClaimHash(trx, userId, hash, at);
      if (changed) {
        await this.audit.record(
          { userId, requestId: null },
          { action: CLAIM_SYNC_ACTION, resourceType: RESOURCE_TYPE, outcome: 'success', metadata: { groups: names } },
          trx,
        );
      }
    });
  }

  private record(actor: Actor, action: string, groupId: string, metadata: Record<string, unknown>, trx: Database) {
    return this.audit.record(actor, { action, resourceType: RESOURCE_TYPE, resourceId: groupId, outcome: 'success', metadata }, trx);
  }
}
