import { ApiError } from '../../platform/errors';
import { InvalidPromptRequest, type McpPrompts } from './prompts';
import { InvalidResourceRequest, type McpResources, RESOURCE_TEMPLATES } from './resources';
import { InvalidToolCall, type McpCaller, type McpTools } from './tools';

/** The parts an MCP server of the workspace serves. */
export interface WorkspaceParts {
  tools: McpTools;
  prompts: McpPrompts;
  resources: McpResources;
  /** The service's version, announced in the MCP handshake. */
  version: string;
  /** Where a failure of the service's own (a database error) is logged; the client is told only that it failed. */
  log: (message: string, meta: Record<string, unknown>) => void;
}

// The SDK is ESM: loaded once, on first use.
const importSdk = () => Promise.all([import('@modelcontextprotocol/sdk/server/mcp.js'), import('@modelcontextprotocol/sdk/types.js')]);
let sdk: ReturnType<typeof importSdk> | undefined;
const loadSdk = () => (sdk ??= importSdk());

/**
 * An MCP server for one request of one caller (the transport is stateless: a server per
 * request). Tools, prompts and resources are read when asked for, through the areas' services,
 * so a request reads only what it needs; the SDK checks every message and answers the errors of
 * the protocol.
 */
export async function workspaceServer(caller: McpCaller, parts: WorkspaceParts) {
  const [{ McpServer }, types] = await loadSdk();
  const { ErrorCode, McpError } = types;
  const server = new McpServer(
    { name: 'ai-workspace', title: 'AI workspace', version: parts.version },
    {
      capabilities: { tools: {}, prompts: {}, resources: {} },
      instructions:
        "The user's workspace: their knowledge, notes, memory, files, projects and automations as tools, their skills as prompts, and their notes and files as resources. Tools that change data may wait for the user's approval.",
    },
  );
  /**
   * The refusals that are the client's fault as JSON-RPC `InvalidParams` errors; any other failure
   * as an internal error that names no cause (the SDK would send its message, which may be SQL).
   */
  const invalidParams = <T>(work: Promise<T>): Promise<T> =>
    work.catch((error: unknown) => {
      if (error instanceof InvalidToolCall || error instanceof InvalidPromptRequest || error instanceof InvalidResourceRequest)
        throw new McpError(ErrorCode.InvalidParams, error.message);
      if (error instanceof ApiError && error.status < 500) throw new McpError(ErrorCode.InvalidParams, error.message);
      parts.log('an MCP request failed', { userId: caller.userId, error: (error as Error).message });
      throw new McpError(ErrorCode.InternalError, 'The workspace could not answer this request; try again.');
    });
  const low = server.server;
  low.setRequestHandler(types.ListToolsRequestSchema, () => invalidParams(parts.tools.list(caller).then((tools) => ({ tools }))));
  low.setRequestHandler(types.CallToolRequestSchema, (request, extra) =>
    invalidParams(parts.tools.call(caller, request.params.name, request.params.arguments ?? {}, extra.signal)),
  );
  low.setRequestHandler(types.ListPromptsRequestSchema, (request) =>
    invalidParams(parts.prompts.list(caller.userId, request.params?.cursor)),
  );
  low.setRequestHandler(types.GetPromptRequestSchema, (request) => invalidParams(parts.prompts.get(caller.userId, request.params.name)));
  low.setRequestHandler(types.ListResourcesRequestSchema, (request) =>
    invalidParams(parts.resources.list(caller.userId, request.params?.cursor)),
  );
  low.setRequestHandler(types.ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: RESOURCE_TEMPLATES }));
  low.setRequestHandler(types.ReadResourceRequestSchema, (request) =>
    invalidParams(parts.resources.read(caller.userId, request.params.uri)),
  );
  return server;
}
