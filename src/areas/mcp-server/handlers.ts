import { type HandlerMap, STREAMED } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentMcpApproval } from './presenter';
import type { McpWorkspaceService } from './service';

// The SDK is ESM: loaded once, on first use.
const importTransport = () => import('@modelcontextprotocol/sdk/server/streamableHttp.js');
let transportModule: ReturnType<typeof importTransport> | undefined;
const loadTransport = () => (transportModule ??= importTransport());

export function mcpWorkspaceHandlers(mcp: McpWorkspaceService): Pick<HandlerMap, 'mcpRequest' | 'getMcpApprovals' | 'decideMcpApproval'> {
  return {
    // The SDK's Streamable HTTP transport in its stateless mode answers the request: a server and a
    // transport for this request alone, closed when the answer ends, so any instance answers any request.
    mcpRequest: async ({ caller, req, res, body }) => {
      const { StreamableHTTPServerTransport } = await loadTransport();
      const server = await mcp.serverFor({ userId: caller.userId, scopes: caller.scopes });
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
      return STREAMED;
    },
    getMcpApprovals: async ({ caller, query }) => {
      if (query.approvalId !== undefined)
        return { approval: presentMcpApproval(await mcp.approvals.approval(caller.userId, query.approvalId)) };
      const page = await mcp.approvals.pendingApprovals(caller.userId, readPage(query));
      return { approvals: page.items.map((row) => presentMcpApproval(row)), nextCursor: page.nextCursor };
    },
    decideMcpApproval: async ({ actor, body }) => ({
      approval: presentMcpApproval(
        await mcp.approvals.decide(actor, { approvalId: body.approvalId, decision: body.decision, arguments: body.arguments }),
      ),
    }),
  };
}
