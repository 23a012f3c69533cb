import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentServer, presentTool } from './presenter';
import type { McpServerService } from './service';

export function mcpServerHandlers(
  servers: McpServerService,
): Pick<HandlerMap, 'getMcpServers' | 'createMcpServer' | 'updateMcpServer' | 'deleteMcpServer' | 'refreshMcpServer' | 'testMcpServer'> {
  return {
    getMcpServers: async ({ caller, query }) => {
      if (query.serverId !== undefined) return { server: presentServer(await servers.server(caller.userId, query.serverId)) };
      const { items, nextCursor } = await servers.servers(caller.userId, readPage(query));
      return { servers: items.map(presentServer), nextCursor };
    },
    createMcpServer: async ({ actor, body }) => ({ server: presentServer(await servers.createServer(actor, body)) }),
    updateMcpServer: async ({ actor, body }) => ({ server: presentServer(await servers.updateServer(actor, body)) }),
    deleteMcpServer: async ({ actor, query, body }) => {
      const serverId = idFromQueryOrBody('serverId', query, body);
      await servers.deleteServer(actor, serverId);
      return { serverId, deleted: true };
    },
    refreshMcpServer: async ({ caller, body }) => ({ server: presentServer(await servers.refresh(caller.userId, body.serverId)) }),
    testMcpServer: async ({ caller, body }) => {
      const result = await servers.test(caller.userId, body);
      return { result: { ok: result.ok, tools: result.tools.map(presentTool), error: result.error, testedAt: result.testedAt.getTime() } };
    },
  };
}
