import type { ListedTool } from './client';
import { namespacedName } from './names';
import type * as repo from './repository';

/** A server's tool catalog as stored, and the policies its tools are called under. */

export type ToolPolicy = 'allow' | 'approval_required' | 'deny';

/** A tool of a server's catalog, as stored. */
export interface CatalogTool extends ListedTool {
  namespacedName: string;
}

/** A catalog tool with its effective policy. */
export interface PolicedTool extends CatalogTool {
  policy: ToolPolicy;
}

export const DEFAULT_TOOL_POLICY: ToolPolicy = 'approval_required';

export const toolsOf = (row: Pick<repo.ServerRow, 'tools'>): CatalogTool[] => (row.tools as unknown as CatalogTool[] | null) ?? [];
export const policiesOf = (row: Pick<repo.ServerRow, 'tool_policies'>): Record<string, ToolPolicy> =>
  (row.tool_policies as unknown as Record<string, ToolPolicy> | null) ?? {};

/** The catalog's tools with the policies of the server (stored, or a draft's). */
export function policed(tools: CatalogTool[], defaultPolicy: ToolPolicy, policies: Record<string, ToolPolicy>): PolicedTool[] {
  return tools.map((tool) => ({ ...tool, policy: policies[tool.name] ?? defaultPolicy }));
}

/** The listed tools named for models (a name the server lists twice is kept once). */
export function catalogOf(prefix: string, listed: ListedTool[]): CatalogTool[] {
  const seen = new Set<string>();
  const tools: CatalogTool[] = [];
  for (const tool of listed) {
    const name = namespacedName(prefix, tool.name);
    if (seen.has(name)) continue;
    seen.add(name);
    tools.push({ name: tool.name, namespacedName: name, description: tool.description, inputSchema: tool.inputSchema });
  }
  return tools;
}
