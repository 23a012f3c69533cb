import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js' with { 'resolution-mode': 'import' };
import { ApiError } from '../../platform/errors';
import type { ToolDefinition, ToolService } from '../tools/service';
import type { McpApprovalService } from './approvals';
import { presentMcpApproval } from './presenter';

/** Who calls through /mcp: the user, and the scopes of their access token (unset: every scope). */
export interface McpCaller {
  userId: string;
  scopes?: readonly string[];
}

/** A request the MCP server refuses as a JSON-RPC error (`InvalidParams`): an unknown tool, arguments off its schema. */
export class InvalidToolCall extends Error {}

/** The MCP-only tool that reads an approval of a call made here: its status and, once run, the outcome. */
export const APPROVAL_STATUS_TOOL: ToolDefinition = {
  name: 'approval_status',
  description:
    'Reads an approval that a call of a tool needing approval answered with: its status (pending, approved, denied, expired) and, once the approved call ran, its outcome.',
  inputSchema: {
    type: 'object',
    properties: { approvalId: { type: 'string', minLength: 1, maxLength: 200, description: 'The approval (its approvalId).' } },
    required: ['approvalId'],
    additionalProperties: false,
  },
  source: { type: 'builtin' },
  policy: 'allow',
  readOnly: true,
};

/** The scope a tool that changes data or spends needs, when the caller's token has scopes. */
const WRITE_SCOPE = 'write';

const text = (value: string, isError: boolean): CallToolResult => ({ content: [{ type: 'text', text: value }], isError });

/**
 * The caller's tools as MCP tools: the registry's (built-in and their MCP servers'), with the
 * same policies and argument-bound approvals as chat, and `approval_status`.
 */
export class McpTools {
  constructor(
    private readonly tools: Pick<ToolService, 'forTurn' | 'checkArguments'>,
    private readonly approvals: Pick<McpApprovalService, 'call' | 'approval'>,
  ) {}

  /** Every tool of the caller but those whose policy is `deny`. */
  async list(caller: McpCaller): Promise<Tool[]> {
    const turn = await this.tools.forTurn(caller.userId);
    return [...turn.definitions.filter((d) => d.policy !== 'deny'), APPROVAL_STATUS_TOOL].map((d) => ({
      name: d.name,
      description: d.description,
      inputSchema: d.inputSchema as Tool['inputSchema'],
      annotations: { readOnlyHint: d.readOnly === true },
      _meta: { policy: d.policy },
    }));
  }

  /**
   * Calls a tool: `allow` runs it; `approval_required` answers that the call awaits approval (with
   * the approval's id), or the decision once made (the stored outcome of the call that ran, or
   * the denial). A tool that is not listed, or arguments that do not fit its schema, throw
   * InvalidToolCall; a tool that changes data, called with a token without `write`, is a tool error.
   */
  async call(caller: McpCaller, name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<CallToolResult> {
    if (name === APPROVAL_STATUS_TOOL.name) {
      this.check(APPROVAL_STATUS_TOOL, args);
      const approval = await this.approvals.approval(caller.userId, args.approvalId as string).catch((error: unknown) => {
        if (error instanceof ApiError && error.status === 404) return null;
        throw error;
      });
      if (!approval) return text(`There is no approval ${String(args.approvalId)} of a call made here.`, true);
      const presented = presentMcpApproval(approval);
      return { ...text(JSON.stringify(presented), false), structuredContent: { approval: presented } };
    }
    const turn = await this.tools.forTurn(caller.userId);
    const definition = turn.find(name);
    if (!definition || definition.policy === 'deny') throw new InvalidToolCall(`Tool ${name} not found`);
    this.check(definition, args);
    if (caller.scopes && definition.readOnly !== true && !caller.scopes.includes(WRITE_SCOPE)) {
      return text(
        `The tool ${name} changes data or spends: it needs the access token scope "${WRITE_SCOPE}", which this token lacks (its scopes: ${caller.scopes.join(', ') || 'none'}). It did not run.`,
        true,
      );
    }
    if (definition.policy === 'allow') {
      const result = await turn.run(name, args, signal);
      return text(result.output, result.isError);
    }
    const found = await this.approvals.call(caller.userId, name, args);
    const approval = presentMcpApproval(found.approval);
    if (found.state === 'pending') {
      return {
        ...text(
          `This call of ${name} awaits the user's approval (approval ${approval.approvalId}, until ${new Date(approval.expiresAt).toISOString()}); it has not run. ` +
            'Once the user decided, call the tool again with the same arguments for its outcome, or call approval_status.',
          false,
        ),
        structuredContent: { approval },
      };
    }
    if (found.state === 'denied')
      return text(`The user denied this call of ${name} (approval ${approval.approvalId}). It did not run.`, true);
    if (!found.outcome)
      return {
        ...text(
          `The user approved this call of ${name} (approval ${approval.approvalId}); it is running. Call again for its outcome.`,
          false,
        ),
        structuredContent: { approval },
      };
    return text(found.outcome.output, found.outcome.isError);
  }

  private check(definition: ToolDefinition, args: Record<string, unknown>): void {
    const problem = this.tools.checkArguments(definition, args);
    if (problem) throw new InvalidToolCall(`Invalid arguments for tool ${definition.name}: ${problem}`);
  }
}
