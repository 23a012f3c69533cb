import type { FailureLog } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import type { CapabilityService } from '../capabilities/service';
import { IntegrationUnavailable, NotConnected } from '../integrations/service';
import { McpFailure, type McpOutcome, type RawToolResult } from './client';
import { policed, policiesOf, type ToolPolicy, toolsOf } from './catalog';
import type { McpExchanges, McpObserver } from './exchanges';
import { prefixOf } from './names';
import * as repo from './repository';

// The tool-source interface: the same shapes as the tools area declares.

/** A tool a model may be offered. */
export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  source: { type: 'builtin' } | { type: 'mcp'; serverId: string; serverName: string };
  policy: ToolPolicy;
}

/** What a tool call gave: its output for the model, whether it is an error, whether it was cut, and whether its server is unavailable. */
export interface ToolCallResult {
  output: string;
  isError: boolean;
  /** The answer was cut here: its output past the caller's cap, or the whole answer past the transport's. */
  truncated?: true;
  unavailable?: UnavailableServer;
}

/** A server whose tools are left out, and why (for the reply to say so). */
export interface UnavailableServer {
  serverId: string;
  serverName: string;
  reason: string;
}

/** How a call fails when its server is down (rather than the call itself: too large an answer, a JSON-RPC error, a cancelled turn). */
const SERVER_DOWN: ReadonlySet<McpOutcome> = new Set(['timeout', 'unreachable', 'http_error', 'not_allowed']);

export interface McpToolSourceDeps {
  db: Database;
  capabilities: Pick<CapabilityService, 'isEnabled'>;
  exchanges: Pick<McpExchanges, 'callTool'>;
  /** Where failed calls are logged (never with the credentials or the address). */
  log?: FailureLog;
  observe?: McpObserver;
}

/** The caller's MCP servers as a tool source of chat: their tools with the effective policies, and the calls of those tools. */
export class McpToolSource {
  private readonly db: Database;
  private readonly capabilities: Pick<CapabilityService, 'isEnabled'>;
  private readonly exchanges: Pick<McpExchanges, 'callTool'>;
  private readonly log: FailureLog;
  private readonly observe: McpObserver;

  constructor({ db, capabilities, exchanges, log = () => undefined, observe = () => undefined }: McpToolSourceDeps) {
    this.db = db;
    this.capabilities = capabilities;
    this.exchanges = exchanges;
    this.log = log;
    this.observe = observe;
  }

  /** The enabled servers' tools with their effective policies; servers in error (or all, with `mcp` off) are unavailable. */
  async listTools(userId: string): Promise<{ tools: ToolDefinition[]; unavailable: UnavailableServer[] }> {
    const rows = await repo.enabledServers(this.db, userId);
    if (rows.length === 0) return { tools: [], unavailable: [] };
    if (!(await this.capabilities.isEnabled('mcp'))) {
      return {
        tools: [],
        unavailable: rows.map((row) => ({
          serverId: row.id,
          serverName: row.name,
          reason: 'MCP servers are disabled for this deployment.',
        })),
      };
    }
    const tools: ToolDefinition[] = [];
    const unavailable: UnavailableServer[] = [];
    for (const row of rows) {
      if (row.status !== 'active') {
        unavailable.push({ serverId: row.id, serverName: row.name, reason: row.last_error ?? 'Its tool catalog has not been read yet.' });
        continue;
      }
      for (const tool of policed(toolsOf(row), row.default_tool_policy as ToolPolicy, policiesOf(row))) {
        tools.push({
          name: tool.namespacedName,
          description: tool.description,
          inputSchema: tool.inputSchema,
          source: { type: 'mcp', serverId: row.id, serverName: row.name },
          policy: tool.policy,
        });
      }
    }
    return { tools, unavailable };
  }

  /**
   * Calls the tool `name` (a namespaced name of one of the user's servers) with the SDK. Never
   * throws for the server's sake: an unknown or denied tool, a server off or failing, a timeout or
   * an answer past the transport's cap are error results (the last `truncated`); output past
   * `maxResultBytes` is cut, and `truncated`.
   */
  async callTool(
    userId: string,
    name: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; maxResultBytes: number },
  ): Promise<ToolCallResult> {
    const prefix = prefixOf(name);
    const row = prefix === null ? undefined : await repo.findServerByPrefix(this.db, userId, prefix);
    const tool = row ? toolsOf(row).find((t) => t.namespacedName === name) : undefined;
    const refuse = (output: string): ToolCallResult => ({ output, isError: true });
    if (!row || !tool) return refuse(`There is no tool named ${name}.`);
    if (!(await this.capabilities.isEnabled('mcp'))) return refuse('MCP servers are disabled for this deployment.');
    if (!row.enabled) return refuse(`The MCP server "${row.name}" is disabled.`);
    if ((policiesOf(row)[tool.name] ?? row.default_tool_policy) === 'deny') return refuse(`The tool ${name} is denied by its policy.`);
    const started = performance.now();
    try {
      const raw = await this.exchanges.callTool(row, tool.name, args, options.signal);
      const result = toResult(raw, options.maxResultBytes);
      this.observe('call_tool', result.isError ? 'tool_error' : 'ok', (performance.now() - started) / 1000);
      return result;
    } catch (failure) {
      // A connection that is missing, expired or cannot be refreshed now: the model is told to have the user connect.
      if (failure instanceof NotConnected || failure instanceof IntegrationUnavailable) return refuse(failure.message);
      const known =
        failure instanceof McpFailure ? failure : new McpFailure('protocol', "The MCP server's answer could not be read.", String(failure));
      this.observe('call_tool', known.outcome, (performance.now() - started) / 1000);
      this.log('MCP tool call failed', {
        serverId: row.id,
        tool: tool.name,
        outcome: known.outcome,
        error: known.message,
        detail: known.detail,
      });
      // An answer past the transport's cap was cut while it was read: nothing of it is kept.
      if (known.outcome === 'too_large') return { ...refuse(known.message), truncated: true };
      // A server that cannot be reached (or answers HTTP errors) is left out for the rest of the turn.
      if (!SERVER_DOWN.has(known.outcome)) return refuse(known.message);
      return { output: known.message, isError: true, unavailable: { serverId: row.id, serverName: row.name, reason: known.message } };
    }
  }
}

/**
 * A tool's answer as output for the model: its text content joined, other content summarized
 * (`[image: image/png, 2048 bytes]`), structured content as JSON when there is no content; cut to
 * `maxBytes` (UTF-8) with a note of how much was left out, and then `truncated`.
 */
export function toResult(raw: RawToolResult, maxBytes: number): ToolCallResult {
  const parts: string[] = [];
  if (Array.isArray(raw.content)) {
    for (const item of raw.content as Array<Record<string, unknown>>) parts.push(summarize(item));
  }
  if (parts.length === 0 && raw.structuredContent !== undefined) parts.push(JSON.stringify(raw.structuredContent));
  if (parts.length === 0 && raw.toolResult !== undefined) parts.push(JSON.stringify(raw.toolResult));
  const text = parts.join('\n');
  const result: ToolCallResult = { output: truncate(text, maxBytes), isError: raw.isError === true };
  if (Buffer.byteLength(text) > maxBytes) result.truncated = true;
  return result;
}

function summarize(item: Record<string, unknown>): string {
  const bytesOf = (data: unknown) => (typeof data === 'string' ? Math.floor((data.length * 3) / 4) : 0);
  switch (item.type) {
    case 'text':
      return typeof item.text === 'string' ? item.text : '';
    case 'image':
    case 'audio':
      return `[${item.type}: ${String(item.mimeType ?? 'unknown type')}, ${bytesOf(item.data)} bytes]`;
    case 'resource': {
      const resource = (item.resource ?? {}) as Record<string, unknown>;
      if (typeof resource.text === 'string') return resource.text;
      return `[resource: ${String(resource.uri ?? '')}${resource.mimeType ? `, ${String(resource.mimeType)}` : ''}, ${bytesOf(resource.blob)} bytes]`;
    }
    case 'resource_link':
      return `[resource link: ${String(item.name ?? '')} ${String(item.uri ?? '')}]`;
    default:
      return `[${String(item.type)} content]`;
  }
}

/** The text cut to `maxBytes` of UTF-8 (on a character boundary), with a note saying so. */
export function truncate(text: string, maxBytes: number): string {
  const total = Buffer.byteLength(text);
  if (total <= maxBytes) return text;
  const note = `\n[output truncated: ${total} bytes, only the first part is shown]`;
  const room = Math.max(0, maxBytes - Buffer.byteLength(note));
  const kept = Buffer.from(text)
    .subarray(0, room)
    .toString('utf8')
    .replace(/\uFFFD+$/, '');
  return room === 0
    ? Buffer.from(text)
        .subarray(0, maxBytes)
        .toString('utf8')
        .replace(/\uFFFD+$/, '')
    : `${kept}${note}`;
}
