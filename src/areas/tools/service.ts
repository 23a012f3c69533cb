import type { SettingsService } from '../settings/service';
import { ToolArguments } from './arguments';

export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  source: { type: 'builtin' } | { type: 'mcp'; serverId: string; serverName: string };
  policy: 'allow' | 'approval_required' | 'deny';
  /** True for a tool known to only read (the built-in read tools); unset when it may change data or spend. */
  readOnly?: boolean;
}
/** A source (an MCP server) whose tools are left out, and why (never its address or credentials). */
export interface UnavailableSource {
  serverId: string;
  serverName: string;
  reason: string;
}
/**
 * A call's output for the model; `truncated` when the source cut it (an MCP answer past a cap);
 * `unavailable` when the call could not reach its source (the turn goes on without the source's tools).
 */
export interface ToolCallResult {
  output: string;
  isError: boolean;
  truncated?: true;
  unavailable?: UnavailableSource;
}
/** The knowledge a skill's turn searches (its knowledge scope): the built-in search tools search only it. */
export interface ToolKnowledgeScope {
  projectIds: string[];
  fileIds: string[];
}

export interface ToolSource {
  /** The caller's enabled tools of this source; servers that failed are named in `unavailable` (left out of the turn). */
  listTools(userId: string): Promise<{ tools: ToolDefinition[]; unavailable: UnavailableSource[] }>;
  /**
   * Calls one of the caller's tools with arguments already checked against its `inputSchema`;
   * `output` is capped at maxResultBytes; throws only on programming errors.
   */
  callTool(
    userId: string,
    name: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; maxResultBytes: number; within?: ToolKnowledgeScope | null },
  ): Promise<ToolCallResult>;
}

export type ToolPolicy = ToolDefinition['policy'];
export type ToolApprovalPreference = 'ask_for_changes' | 'always_ask' | 'auto_approve';
export type Unavailable = Awaited<ReturnType<ToolSource['listTools']>>['unavailable'];

/** How one tool call ended, as its result part records it and the model is told. */
export type ToolOutcome = 'success' | 'error' | 'timeout' | 'denied' | 'not_found';

export interface ToolRunResult {
  outcome: ToolOutcome;
  output: string;
  isError: boolean;
  truncated: boolean;
  /** The call could not reach its source (see ToolCallResult). */
  unavailable?: UnavailableSource;
}

/** Names model APIs accept for tools. */
export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * A tool's policy for a caller: its own, adjusted by their `toolApproval` setting (`always_ask`
 * asks for every call, `auto_approve` runs what would ask); `deny` never changes.
 */
export function effectivePolicy(policy: ToolPolicy, preference: ToolApprovalPreference): ToolPolicy {
  if (policy === 'deny') return 'deny';
  if (preference === 'always_ask') return 'approval_required';
  if (preference === 'auto_approve') return 'allow';
  return policy;
}

const STRICTNESS: Record<ToolPolicy, number> = { allow: 0, approval_required: 1, deny: 2 };

/**
 * A turn's tools narrowed to `only` (a skill's tools): those of them the caller has, each under
 * the stricter of its policy for the caller and the one `only` gives; no other tool is offered or
 * runs. The built-in search tools search only `within` (the skill's knowledge scope), when given.
 */
export function narrowTools(
  tools: TurnTools,
  only: ReadonlyArray<{ name: string; policy: ToolPolicy }>,
  within: ToolKnowledgeScope | null = null,
): TurnTools {
  const wanted = new Map(only.map((tool) => [tool.name, tool.policy]));
  const definitions = tools.definitions.flatMap((definition) => {
    const policy = wanted.get(definition.name);
    if (policy === undefined) return [];
    return [{ ...definition, policy: STRICTNESS[policy] > STRICTNESS[definition.policy] ? policy : definition.policy }];
  });
  const byName = new Map(definitions.map((d) => [d.name, d]));
  return {
    definitions,
    unavailable: tools.unavailable,
    find: (name) => byName.get(name),
    run: async (name, args, signal) =>
      byName.has(name)
        ? tools.run(name, args, signal, within)
        : { outcome: 'not_found', output: `There is no tool named ${name}.`, isError: true, truncated: false },
  };
}

const TRUNCATED = '\n[truncated: the result was longer than the cap]';

/** `text` cut to at most `maxBytes` bytes of UTF-8 (a marker saying so at its end), and whether it was. */
export function capOutput(text: string, maxBytes: number): { output: string; truncated: boolean } {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return { output: text, truncated: false };
  const room = Math.max(0, maxBytes - Buffer.byteLength(TRUNCATED));
  // A character cut in half decodes as U+FFFD: dropped.
  const head = bytes
    .subarray(0, room)
    .toString('utf8')
    .replace(/\uFFFD+$/, '');
  return { output: `${head}${TRUNCATED}`.slice(0, maxBytes), truncated: true };
}

export interface ToolLimits {
  /** How long one call may take. */
  timeoutMs: number;
  /** The most bytes of a call's result the model is given. */
  maxResultBytes: number;
}

/** What a ToolService is built from. */
export interface ToolServiceDeps {
  /** The built-in tools (first: their names win). */
  builtins: ToolSource;
  /** Other sources (the MCP servers'), in order. */
  sources: ToolSource[];
  settings: Pick<SettingsService, 'get'>;
  limits: ToolLimits;
  log?: (message: string, meta: Record<string, unknown>) => void;
}

/** The caller's tools for one chat turn: their definitions (effective policies) and how to run them. */
export interface TurnTools {
  readonly definitions: ToolDefinition[];
  readonly unavailable: Unavailable;
  find(name: string): ToolDefinition | undefined;
  /**
   * Runs a tool (its policy already checked): a timeout, a result cap; never throws for the tool's
   * failure. `within` narrows what the built-in search tools search.
   */
  run(name: string, args: unknown, signal: AbortSignal, within?: ToolKnowledgeScope | null): Promise<ToolRunResult>;
}

/**
 * The tool registry: the built-in tools and the other sources' (MCP servers), with each tool's
 * policy for the caller, and the running of a call under the deployment's limits.
 */
export class ToolService {
  private readonly builtins: ToolSource;
  private readonly sources: ToolSource[];
  private readonly settings: Pick<SettingsService, 'get'>;
  readonly limits: ToolLimits;
  private readonly log: (message: string, meta: Record<string, unknown>) => void;
  private readonly arguments = new ToolArguments();

  constructor({ builtins, sources, settings, limits, log }: ToolServiceDeps) {
    this.builtins = builtins;
    this.sources = sources;
    this.settings = settings;
    this.limits = limits;
    this.log = log ?? (() => undefined);
  }

  /** The caller's tools with their effective policies, and the sources that could not be read. */
  async list(userId: string): Promise<{ tools: ToolDefinition[]; unavailable: Unavailable }> {
    const turn = await this.forTurn(userId);
    return { tools: turn.definitions, unavailable: turn.unavailable };
  }

  /** The caller's tools, read once for a turn (or its continuation). */
  async forTurn(userId: string): Promise<TurnTools> {
    // The settings and every source's tools are read at once; a source is to report its failures
    // in `unavailable`, and one that throws is left out all the same.
    const sources = [this.builtins, ...this.sources];
    const [{ toolApproval }, ...lists] = await Promise.all([
      this.settings.get(userId),
      ...sources.map((source) =>
        source.listTools(userId).catch((error: unknown) => {
          this.log('a tool source failed to list its tools', { error: (error as Error).message });
          return null;
        }),
      ),
    ]);
    const bySource = new Map<string, ToolSource>();
    const definitions: ToolDefinition[] = [];
    const unavailable: Unavailable = [];
    for (const [i, source] of sources.entries()) {
      const listed = lists[i];
      if (!listed) continue;
      unavailable.push(...listed.unavailable);
      for (const tool of listed.tools) {
        if (!TOOL_NAME.test(tool.name) || bySource.has(tool.name)) continue;
        bySource.set(tool.name, source);
        definitions.push({ ...tool, policy: effectivePolicy(tool.policy, toolApproval as ToolApprovalPreference) });
      }
    }
    const byName = new Map(definitions.map((d) => [d.name, d]));
    return {
      definitions,
      unavailable,
      find: (name) => byName.get(name),
      run: async (name, args, signal, within = null) => {
        const source = bySource.get(name);
        const definition = byName.get(name);
        if (!source || !definition)
          return { outcome: 'not_found', output: `There is no tool named ${name}.`, isError: true, truncated: false };
        return this.call(source, userId, definition, args, signal, within);
      },
    };
  }

  private async call(
    source: ToolSource,
    userId: string,
    definition: ToolDefinition,
    args: unknown,
    turn: AbortSignal,
    within: ToolKnowledgeScope | null,
  ): Promise<ToolRunResult> {
    const { name } = definition;
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      return { outcome: 'error', output: 'The arguments must be a JSON object.', isError: true, truncated: false };
    }
    const refusal = this.checkArguments(definition, args as Record<string, unknown>);
    if (refusal) return { outcome: 'error', output: refusal, isError: true, truncated: false };
    const { timeoutMs, maxResultBytes } = this.limits;
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new Error(`no result within ${timeoutMs} ms`)), timeoutMs);
    const signal = AbortSignal.any([turn, timeout.signal]);
    try {
      const timedOut = new Promise<'timeout'>((resolve) => signal.addEventListener('abort', () => resolve('timeout'), { once: true }));
      const result = await Promise.race([
        source.callTool(userId, name, args as Record<string, unknown>, { signal, maxResultBytes, within }),
        timedOut,
      ]);
      if (result === 'timeout') {
        return {
          outcome: 'timeout',
          output: turn.aborted ? 'The call was cancelled.' : `The tool gave no result within ${timeoutMs} ms.`,
          isError: true,
          truncated: false,
        };
      }
      // Cut here at the cap, or already by the source.
      const { output, truncated } = capOutput(result.output, maxResultBytes);
      const run: ToolRunResult = {
        outcome: result.isError ? 'error' : 'success',
        output,
        isError: result.isError,
        truncated: truncated || result.truncated === true,
      };
      if (result.unavailable) run.unavailable = result.unavailable;
      return run;
    } catch (error) {
      this.log('a tool call failed', { tool: name, error: (error as Error).message });
      return { outcome: 'error', output: 'The tool failed.', isError: true, truncated: false };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * What the model is told when `args` do not fit the tool's schema (null when they do). A schema
   * of an MCP server that Ajv cannot compile leaves the call to the server, which checks its own
   * arguments (the tool stays usable; the failure is logged once per schema); a built-in tool's
   * never runs unchecked. Also read before a call is asked for approval (the MCP server's).
   */
  checkArguments(definition: ToolDefinition, args: Record<string, unknown>): string | null {
    const check = this.arguments.check(definition.inputSchema, args);
    if (check.compiled) return check.problems.length > 0 ? `The arguments are not valid: ${check.problems.join('; ')}.` : null;
    if (check.first)
      this.log('a tool input schema could not be compiled; its calls are checked by the tool alone', {
        tool: definition.name,
        error: check.reason,
      });
    return definition.source.type === 'builtin' ? 'The tool cannot check its arguments.' : null;
  }
}
