import type { Schemas } from '../../platform/api-types';
import { millis, millisOrNull } from '../../platform/db/timestamps';
import type { ServerView } from './repository';
import { type PolicedTool, policed, policiesOf, type ToolPolicy, toolsOf } from './catalog';
import { integrationIdOf } from './exchanges';

export function presentTool(tool: PolicedTool): Schemas['McpTool'] {
  return {
    name: tool.name,
    namespacedName: tool.namespacedName,
    description: tool.description,
    inputSchema: tool.inputSchema,
    policy: tool.policy,
  };
}

/** A server as clients see it: never its credentials (`hasCredentials`). */
export function presentServer(row: ServerView): Schemas['McpServer'] {
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
    catalogRefreshedAt: millisOrNull(row.catalog_refreshed_at),
    status: row.status as Schemas['McpServer']['status'],
    lastError: row.last_error,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}
