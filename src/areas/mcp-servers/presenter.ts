import type { Schemas } from '../../platform/api-types';
import type { ServerRow } from './repository';
import { integrationIdOf, type PolicedTool, policed, policiesOf, type ToolPolicy, toolsOf } from './service';

export function presentTool(tool: PolicedTool): Schemas['McpTool'] {
  return { name: tool.name, namespacedName: tool.namespacedName, description: tool.description, inputSchema: tool.inputSchema, policy: tool.policy };
}

/** A server as clients see it: never its credentials (`hasCredentials`). */
export function presentServer(row: ServerRow): Schemas['McpServer'] {
  const policies = policiesOf(row);
  return {
    serverId: row.id,
    name: row.name,
    toolPrefix: row.tool_prefix,
    url: row.url,
    transport: row.transport as Schemas['McpTransport'],
    authentication: row.authentication as Schemas['McpAuthentication'],
    headerName: row.header_name,
    hasCredentials: row.credentials !== null,
    integrationId: integrationIdOf(row),
    enabled: row.enabled,
    timeoutMs: row.timeout_ms,
    defaultToolPolicy: row.default_tool_policy as ToolPolicy,
    toolPolicies: policies,
    tools: policed(toolsOf(row), row.default_tool_policy as ToolPolicy, policies).map(presentTool),
    catalogRefreshedAt: row.catalog_refreshed_at?.getTime() ?? null,
    status: row.status as Schemas['McpServer']['status'],
    lastError: row.last_error,
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
  };
}
