import { topic, variable } from './declare';
import { bool, entries, int, parsed } from './kinds';

export type ToolPolicy = 'allow' | 'approval_required' | 'deny';

/** `name=policy` pairs: `notes_create=deny,memory_save=allow`. */
const toolPolicies = parsed('comma-separated `tool=policy`', (value, problem) => {
  const policies: Record<string, ToolPolicy> = {};
  for (const entry of entries(value)) {
    const match = /^([a-zA-Z0-9_-]{1,64})=(allow|approval_required|deny)$/.exec(entry);
    if (match) policies[match[1] as string] = match[2] as ToolPolicy;
    else problem(`must be a comma-separated list of tool=policy, the policy allow, approval_required or deny (got "${entry}")`);
  }
  return policies;
});

/** Tools in chat turns (src/areas/tools) and users' MCP servers (src/areas/mcp-servers). */
export const tools = topic('Tools and MCP servers', {
  tools: {
    enabled: variable('CHAT_TOOLS', bool(), {
      default: 'true',
      doc: "offer the caller's tools (`GET /api/v1/tools`) to the model in chat turns; `false` for models that refuse the `tools` field (see `docs/areas/tools.md`)",
    }),
    maxSteps: variable('TOOL_MAX_STEPS', int(1, 50), {
      default: '8',
      doc: 'the most model calls in one chat turn; the last is made without tools, so the turn ends with an answer',
    }),
    callTimeoutMs: variable('TOOL_CALL_TIMEOUT_MS', int(10, 600_000), {
      default: '30000',
      doc: 'the longest one tool call may take; after it the model gets a `timeout` result',
    }),
    maxResultBytes: variable('TOOL_RESULT_MAX_BYTES', int(256, 1_048_576), {
      default: '32768',
      doc: "the most bytes (UTF-8) of a tool call's result given to the model and stored; longer results are cut with a marker",
    }),
    approvalTtlMs: variable('APPROVAL_TTL_MS', int(100, 604_800_000), {
      default: '3600000',
      doc: 'how long a tool call waiting for approval waits; then its reply ends as `failed` (`approval_expired`)',
    }),
    builtinPolicies: variable('BUILTIN_TOOL_POLICIES', toolPolicies, {
      unset: {},
      doc: "policies replacing the built-in tools' defaults: `memory_save=deny,notes_create=allow` (`allow`, `approval_required`, `deny`)",
    }),
  },
  mcp: {
    serversPerUser: variable('MCP_SERVERS_PER_USER', int(0, 1000), {
      default: '20',
      doc: 'the most MCP servers one user may have (0: none; `409` past it)',
    }),
    maxResponseBytes: variable('MCP_MAX_RESPONSE_BYTES', int(64 * 1024, 256 * 1024 * 1024), {
      default: '16777216',
      doc: "the most bytes one answer of an MCP server may have; a longer answer fails the exchange (a catalog read or a tool call) instead of being held in memory. Tool output is cut much shorter for the model (the caller's cap)",
    }),
  },
});
