import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { errors } from '../../platform/errors';
import type { CapabilityService } from '../capabilities/service';
import { presentConnection, presentGroupPolicy, presentModel, presentPolicy, presentProvider } from './presenter';
import type { ModelConnectionService } from './connections';
import type { GroupModelPolicyService } from './group-policy';
import type { ModelPolicyService } from './policy';
import type { ModelService } from './service';

export interface ModelAreaServices {
  models: ModelService;
  connections: ModelConnectionService;
  policy: ModelPolicyService;
  capabilities: Pick<CapabilityService, 'isEnabled'>;
}

export function modelHandlers({
  models,
  connections,
  policy,
  capabilities,
}: ModelAreaServices): Pick<
  HandlerMap,
  | 'getModels'
  | 'getModelProviders'
  | 'createModelConnection'
  | 'updateModelConnection'
  | 'deleteModelConnection'
  | 'testModelConnection'
  | 'getModelPolicy'
  | 'updateModelPolicy'
> {
  return {
    getModels: async ({ caller }) => ({ models: (await models.available(caller.userId)).map(presentModel) }),
    // The published route answers the deployment's providers whatever `byok` says; the caller's
    // connections only while it is on.
    getModelProviders: async ({ caller, query }) => {
      const providers = [presentProvider(models.deploymentProvider)];
      const byok = await capabilities.isEnabled('byok');
      if (query.connectionId !== undefined) {
        if (!byok) throw errors.capabilityDisabled('byok');
        return { providers, connection: presentConnection(await connections.connection(caller.userId, query.connectionId)) };
      }
      const page = readPage(query);
      if (!byok) return { providers, connections: [], nextCursor: null };
      const { items, nextCursor } = await connections.connections(caller.userId, page);
      return { providers, connections: items.map(presentConnection), nextCursor };
    },
    createModelConnection: async ({ actor, body }) => ({ connection: presentConnection(await connections.createConnection(actor, body)) }),
    updateModelConnection: async ({ actor, body }) => ({ connection: presentConnection(await connections.updateConnection(actor, body)) }),
    deleteModelConnection: async ({ actor, query, body }) => {
      const connectionId = idFromQueryOrBody('connectionId', query, body);
      await connections.deleteConnection(actor, connectionId);
      return { connectionId, deleted: true };
    },
    testModelConnection: async ({ caller, body }) => {
      const { result, connection } = await connections.testConnection(caller.userId, body);
      return {
        result: { ok: result.ok, models: result.models, error: result.error, testedAt: result.testedAt.getTime() },
        ...(connection ? { connection: presentConnection(connection) } : {}),
      };
    },
    getModelPolicy: async () => ({ policy: presentPolicy(await policy.policy()) }),
    updateModelPolicy: async ({ actor, body }) => ({ policy: presentPolicy(await policy.updatePolicy(actor, body)) }),
  };
}

/** The groups' model policies, for admins (`/api/v1/admin/groups/model-policy`). */
export function groupModelPolicyHandlers(
  policies: GroupModelPolicyService,
): Pick<HandlerMap, 'getAdminGroupModelPolicies' | 'updateAdminGroupModelPolicy' | 'deleteAdminGroupModelPolicy'> {
  return {
    getAdminGroupModelPolicies: async ({ query }) => {
      if (query.groupId !== undefined) return { policy: presentGroupPolicy(await policies.get(query.groupId)) };
      const page = await policies.list(readPage(query));
      return { policies: page.items.map(presentGroupPolicy), nextCursor: page.nextCursor };
    },
    updateAdminGroupModelPolicy: async ({ actor, body }) => ({ policy: presentGroupPolicy(await policies.update(actor, body)) }),
    deleteAdminGroupModelPolicy: async ({ actor, query, body }) => {
      const groupId = idFromQueryOrBody('groupId', query, body);
      await policies.delete(actor, groupId);
      return { groupId, deleted: true };
    },
  };
}
