import type { Schemas } from '../../platform/api-types';
import type { ToolDefinition, Unavailable } from './service';

export function presentTool(tool: ToolDefinition): Schemas['Tool'] {
  const source: Schemas['ToolSource'] =
    tool.source.type === 'mcp' ? { type: 'mcp', serverId: tool.source.serverId, serverName: tool.source.serverName } : { type: 'builtin' };
  return { name: tool.name, description: tool.description, inputSchema: tool.inputSchema, source, policy: tool.policy };
}

export function presentUnavailable(entry: Unavailable[number]): Schemas['UnavailableToolSource'] {
  return { serverId: entry.serverId, serverName: entry.serverName, reason: entry.reason };
}
