import type { Request } from 'express';
import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentCommand, presentEnvironment } from './presenter';
import type { AgentEnvironmentService } from './service';

/** The environment's credential header (required by the document, so present after validation). */
const credentialOf = (req: Request): string => req.get('environment-credential') ?? '';

export function agentHandlers(
  agents: AgentEnvironmentService,
): Pick<
  HandlerMap,
  | 'getAgentEnvironments'
  | 'createAgentEnvironment'
  | 'deleteAgentEnvironment'
  | 'heartbeatAgentEnvironment'
  | 'getAgentCommands'
  | 'createAgentCommand'
  | 'acknowledgeAgentCommand'
  | 'updateAgentEnvironmentRoots'
> {
  const present = (row: Parameters<typeof presentEnvironment>[0]) => presentEnvironment(row, agents.settings.offlineAfterMs);
  return {
    getAgentEnvironments: async ({ caller, query }) => {
      if (query.environmentId !== undefined) return { environment: present(await agents.get(caller.userId, query.environmentId)) };
      const page = await agents.list(caller.userId, readPage(query));
      return { environments: page.items.map(present), nextCursor: page.nextCursor };
    },
    createAgentEnvironment: async ({ caller, body }) => {
      const { environment, credential } = await agents.register(caller.userId, body);
      return { environment: present(environment), credential };
    },
    deleteAgentEnvironment: async ({ caller, query, body }) => {
      const environmentId = idFromQueryOrBody('environmentId', query, body);
      await agents.delete(caller.userId, environmentId);
      return { environmentId, deleted: true };
    },
    heartbeatAgentEnvironment: async ({ caller, params, body, req }) => {
      const { environment, commands } = await agents.heartbeat(caller.userId, params.environmentId, credentialOf(req), body);
      return { environment: present(environment), commands: commands.map(presentCommand) };
    },
    getAgentCommands: async ({ caller, params, query }) => {
      if (query.commandId !== undefined)
        return { command: presentCommand(await agents.command(caller.userId, params.environmentId, query.commandId)) };
      const page = await agents.commands(caller.userId, params.environmentId, { status: query.status }, readPage(query));
      return { commands: page.items.map(presentCommand), nextCursor: page.nextCursor };
    },
    createAgentCommand: async ({ caller, params, body }) => ({
      command: presentCommand(await agents.enqueue(caller.userId, params.environmentId, body)),
    }),
    acknowledgeAgentCommand: async ({ caller, params, body, req }) => ({
      command: presentCommand(await agents.acknowledge(caller.userId, params, credentialOf(req), body)),
    }),
    updateAgentEnvironmentRoots: async ({ caller, params, body }) => ({
      environment: present(await agents.setGrant(caller.userId, params.environmentId, body.filesystemGrant)),
    }),
  };
}
