import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentGroup, presentMember, presentMembership } from './presenter';
import type { GroupService } from './service';

export function groupHandlers(
  groups: GroupService,
): Pick<
  HandlerMap,
  | 'getAdminGroups'
  | 'createAdminGroup'
  | 'updateAdminGroup'
  | 'deleteAdminGroup'
  | 'listAdminGroupMembers'
  | 'updateAdminGroupMembers'
  | 'listMyGroups'
> {
  return {
    listMyGroups: async ({ caller, query }) => {
      const page = await groups.memberships(caller.userId, readPage(query));
      return { groups: page.items.map(presentMembership), nextCursor: page.nextCursor };
    },
    getAdminGroups: async ({ query }) => {
      if (query.groupId !== undefined) return { group: presentGroup(await groups.get(query.groupId)) };
      const page = await groups.list(readPage(query));
      return { groups: page.items.map(presentGroup), nextCursor: page.nextCursor };
    },
    createAdminGroup: async ({ actor, body }) => ({ group: presentGroup(await groups.create(actor, body)) }),
    updateAdminGroup: async ({ actor, body }) => ({ group: presentGroup(await groups.update(actor, body)) }),
    deleteAdminGroup: async ({ actor, query, body }) => {
      const groupId = idFromQueryOrBody('groupId', query, body);
      await groups.delete(actor, groupId);
      return { groupId, deleted: true };
    },
    listAdminGroupMembers: async ({ query }) => {
      const page = await groups.members(query.groupId, readPage(query));
      return { members: page.items.map(presentMember), nextCursor: page.nextCursor };
    },
    updateAdminGroupMembers: async ({ actor, body }) => ({
      groupId: body.groupId,
      memberCount: await groups.changeMembers(actor, body),
    }),
  };
}
