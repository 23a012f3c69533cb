/**
 * A chat turn as it runs: its state (`Turn`), what it reports (`SendHooks`, `ChatObserver`) and
 * ends with (`SendOutcome`), and the changes of its reply's parts.
 */
import type { Hold } from '../billing/service';
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { ChatMessage, ChatPart, ChatResult, ChatUsage, ModelToolCall, ToolSpec } from '../../platform/ai/models';
import type { Schemas } from '../../platform/api-types';
import { costMicroCents } from '../../platform/usage';
import type { ResolvedModel } from '../models/service';
import type { ToolDefinition, ToolRunResult, TurnTools, UnavailableSource } from '../tools/service';
import type { StoredCitation } from './presenter';
import type * as repo from './repository';

export type FailureCode = 'model_provider_error' | 'model_provider_timeout' | 'cancelled' | 'budget_exhausted' | 'quota_exceeded';

export type MessagePart = Schemas['MessagePart'];
export type ToolCallPart = Schemas['ToolCallPart'];
export type ToolResultPart = Schemas['ToolResultPart'];
export type UnavailablePart = Schemas['ToolSourceUnavailablePart'];

/** How chat turns use tools. */
export interface ChatToolSettings {
  /** Whether turns offer the caller's tools to the model at all (CHAT_TOOLS). */
  enabled: boolean;
  /** The most model calls in one turn; the last is made without tools, so the turn ends with an answer. */
  maxSteps: number;
  /** How long an approval waits for the user's decision. */
  approvalTtlMs: number;
}

/** What chat reports to the metrics. */
export interface ChatObserver {
  /** Seconds from a streamed model call to its first text or tool call. */
  firstToken(seconds: number): void;
  /** Seconds an approval waited for its decision. */
  approvalWait(seconds: number, decision: 'approve' | 'deny'): void;
  /** A tool call's outcome (`tool` is `unknown` for a name the caller has no tool by). */
  toolCall(tool: string, outcome: ToolRunResult['outcome']): void;
}

export interface SendOutcome {
  message: repo.MessageRow;
  reply: repo.MessageRow;
  failure: { code: FailureCode; error: string } | null;
  /** The approval the turn paused for (the reply is `awaiting_approval`), or null. */
  approval: repo.ApprovalRow | null;
}

export interface SendHooks {
  /** The client went away: cancels the reply. */
  signal: AbortSignal;
  /** The user message is stored and the reply begins. */
  onStart?: (message: repo.MessageRow, reply: repo.MessageRow) => void;
  /** Set to receive the reply as it is written (streamed from the provider). */
  onDelta?: (text: string) => void;
  /** A grounded turn's sources, before the reply is written (`failed`: the knowledge could not be searched). */
  onCitations?: (citations: StoredCitation[], retrieval: 'hybrid' | 'lexical' | 'failed') => void;
  /** The model called a tool (streamed replies). */
  onToolCall?: (part: ToolCallPart) => void;
  /** A tool call's result, as the model is given it (streamed replies). */
  onToolResult?: (part: ToolResultPart) => void;
  /** One of the caller's MCP servers is unavailable: the turn goes on without its tools (streamed replies). */
  onToolSourceUnavailable?: (part: UnavailablePart) => void;
}

/** A turn in progress: the reply's parts and usage so far, and what it runs with. */
export interface Turn {
  userId: string;
  model: ResolvedModel;
  reply: repo.MessageRow;
  message: repo.MessageRow;
  prompt: ChatMessage[];
  tools: TurnTools | null;
  parts: MessagePart[];
  usage: ChatUsage;
  cost: number;
  steps: number;
  hooks: SendHooks;
  /** Aborts when the reply is stopped (`POST /api/v1/conversations/stop`): the turn ends `stopped`. */
  stop?: AbortSignal;
  /** Decisions on approvals, by tool call id (a continued turn's). */
  decisions: Map<string, { approve: boolean; arguments: Record<string, unknown> }>;
  /** The model call already started for the turn's next step, if any. */
  next: StartedStep | null;
  /** What the current model call holds against the caller's quotas (null: none applies). */
  hold: Hold | null;
}

/** A model call on its way: its parts (streamed) or its result, and what it was asked with. */
export interface StartedStep {
  offered: ToolSpec[];
  timeout: AbortSignal;
  startedAt: number;
  /** Ends the call (its turn could not be stored). */
  abort: () => void;
  stream: { head: Promise<IteratorResult<ChatPart>>; parts: AsyncIterator<ChatPart> } | null;
  result: Promise<ChatResult> | null;
}

/** A model call's place in its turn, and its usage (what it is charged). */
export interface Step {
  index: number;
  usage: ChatUsage;
}

/** SHA-256 (hex) of the RFC 8785 canonical JSON of `args` (what approvals are bound to). */
export const argumentsDigest = (args: unknown) =>
  createHash('sha256')
    .update(canonicalize(args) ?? 'null')
    .digest('hex');

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

export const toSpec = (d: ToolDefinition): ToolSpec => ({ name: d.name, description: d.description, inputSchema: d.inputSchema });

/** The MCP server a tool comes from, or null for a built-in one. */
export const serverOf = (d: ToolDefinition): string | null => (d.source.type === 'mcp' ? d.source.serverId : null);

/** The sources a reply says the turn went without, by server id. */
export function unavailableIn(parts: MessagePart[]): Map<string, UnavailableSource> {
  const named = new Map<string, UnavailableSource>();
  for (const part of parts) if (part.type === 'tool-source-unavailable') named.set(part.serverId, part);
  return named;
}

/** A reply's text: its text parts, concatenated. */
export const contentOf = (parts: MessagePart[]) => parts.map((p) => (p.type === 'text' ? p.text : '')).join('');

/** Adds a model call's text and tool calls to the turn; returns the step's index and usage. */
export function addStep(turn: Turn, text: string, usage: ChatUsage, calls: ModelToolCall[], observer: ChatObserver): Step {
  if (text !== '') turn.parts.push({ type: 'text', text });
  for (const call of calls) {
    const definition = turn.tools?.find(call.toolName);
    const part: ToolCallPart = {
      type: 'tool-call',
      toolCallId: call.toolCallId,
      toolName: call.toolName,
      arguments: isObject(call.arguments) ? call.arguments : {},
      policy: definition?.policy ?? null,
      approvalId: null,
    };
    turn.parts.push(part);
    turn.hooks.onToolCall?.(part);
    // Arguments that are not an object cannot be run (nor approved): the model is told at once.
    if (!isObject(call.arguments))
      addResult(
        turn,
        part,
        { outcome: 'error', output: 'The arguments must be a JSON object.', isError: true, truncated: false },
        observer,
      );
  }
  const index = turn.steps;
  turn.steps += 1;
  const cost = turn.model.connectionId === null ? costMicroCents(turn.model.info, usage) : 0;
  turn.usage = { inputTokens: turn.usage.inputTokens + usage.inputTokens, outputTokens: turn.usage.outputTokens + usage.outputTokens };
  turn.cost += cost;
  return { index, usage };
}

/** Adds a tool call's result to the turn (and the source it found unavailable, if any). */
export function addResult(turn: Turn, call: ToolCallPart, result: ToolRunResult, observer: ChatObserver): void {
  const { outcome, output, isError, truncated } = result;
  const part: ToolResultPart = {
    type: 'tool-result',
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    outcome,
    output,
    isError,
    truncated,
  };
  turn.parts.push(part);
  observer.toolCall(turn.tools?.find(call.toolName) ? call.toolName : 'unknown', result.outcome);
  turn.hooks.onToolResult?.(part);
  if (result.unavailable) addUnavailable(turn, [result.unavailable]);
}

/** Records in the reply the sources the turn goes on without (each server once per reply). */
export function addUnavailable(turn: Turn, sources: UnavailableSource[]): void {
  const named = unavailableIn(turn.parts);
  for (const source of sources) {
    if (named.has(source.serverId)) continue;
    named.set(source.serverId, source);
    const part: UnavailablePart = {
      type: 'tool-source-unavailable',
      serverId: source.serverId,
      serverName: source.serverName,
      reason: source.reason,
    };
    turn.parts.push(part);
    turn.hooks.onToolSourceUnavailable?.(part);
  }
}

/** The usage ledger's id of a turn's step: the reply's own for the first, `<replyId>:<n>` for the next. */
export const stepResource = (turn: Turn, index: number) => (index === 0 ? turn.reply.id : `${turn.reply.id}:${index + 1}`);

/** The columns recording a turn's progress. */
export function progress(turn: Turn) {
  return {
    content: contentOf(turn.parts),
    parts: JSON.stringify(turn.parts),
    model_calls: turn.steps,
    input_tokens: turn.usage.inputTokens,
    output_tokens: turn.usage.outputTokens,
    cost_micro_cents: turn.cost,
  };
}
