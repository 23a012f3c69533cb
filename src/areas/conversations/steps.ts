import { type ChatResult, type ChatUsage, type ModelToolCall, ModelProviderFailure } from '../../platform/ai/models';
import { ApiError } from '../../platform/errors';
import { promptTokenBound, RESERVED_OUTPUT_TOKENS } from '../../platform/usage';
import type { BudgetGate } from '../billing/service';
import type { ToolDefinition } from '../tools/service';
import { promptOfParts } from './prompt';
import type { ReplyWrites } from './reply-writes';
import { stopTurn } from './turn-stop';
import {
  addResult,
  addStep,
  type ChatObserver,
  contentOf,
  type SendOutcome,
  serverOf,
  type StartedStep,
  type ToolCallPart,
  type ToolResultPart,
  toSpec,
  type Turn,
  unavailableIn,
} from './turn';

export interface TurnStepsDeps {
  /** How long a model call may take. */
  timeoutMs: number;
  /** The most model calls in one turn; the last is made without tools, so the turn ends with an answer. */
  maxSteps: number;
  writes: ReplyWrites;
  observer: ChatObserver;
  /** Reserves each later model call's bound against the caller's quotas (the first is reserved before the turn is stored). */
  billing: Pick<BudgetGate, 'reserve' | 'release'>;
}

/**
 * The steps of a turn: each model call (streamed or whole), the tool calls the model makes, run
 * (or paused for approval) in order, until the model answers, a call waits, or the model fails.
 */
export class TurnSteps {
  private readonly timeoutMs: number;
  private readonly maxSteps: number;
  private readonly writes: ReplyWrites;
  private readonly observer: ChatObserver;
  private readonly billing: Pick<BudgetGate, 'reserve' | 'release'>;

  constructor({ timeoutMs, maxSteps, writes, observer, billing }: TurnStepsDeps) {
    this.timeoutMs = timeoutMs;
    this.maxSteps = maxSteps;
    this.writes = writes;
    this.observer = observer;
    this.billing = billing;
  }

  /**
   * Starts a turn's next model call (its request is on its way when this returns): the turn's
   * prompt and parts so far, and the tools it may still call. The last step is asked without
   * tools, so that the turn ends with an answer; a server found unavailable in the turn is not
   * offered again.
   */
  start(turn: Omit<Turn, 'message' | 'reply'>): StartedStep {
    const down = unavailableIn(turn.parts);
    const offered =
      turn.tools && turn.steps < this.maxSteps - 1
        ? turn.tools.definitions.filter((d) => d.policy !== 'deny' && !down.has(serverOf(d) ?? '')).map(toSpec)
        : [];
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const own = new AbortController();
    const request = {
      model: turn.model.providerModelId,
      messages: [...turn.prompt, ...promptOfParts(turn.parts)],
      signal: AbortSignal.any([turn.hooks.signal, timeout, own.signal]),
      tools: offered.length > 0 ? offered : undefined,
      // Under a quota the call writes no more than its reservation holds.
      settings: turn.hold ? { maxOutputTokens: RESERVED_OUTPUT_TOKENS } : undefined,
    };
    const startedAt = performance.now();
    const abort = () => own.abort(new Error('the turn was not stored'));
    if (turn.hooks.onDelta) {
      const parts = turn.model.caller.stream(request)[Symbol.asyncIterator]();
      const head = parts.next();
      head.catch(() => undefined);
      return { offered, timeout, startedAt, abort, stream: { head, parts }, result: null };
    }
    const result = turn.model.caller.generate(request);
    result.catch(() => undefined);
    return { offered, timeout, startedAt, abort, stream: null, result };
  }

  /**
   * Runs a turn to its next stop: the calls still without a result, then model calls (each its
   * own step, charged), until the model answers without calling a tool (complete), a call needs
   * approval (paused), or the model fails (failed).
   */
  async run(turn: Turn): Promise<SendOutcome> {
    const { hooks, model } = turn;
    let stepText = '';
    let timeout: AbortSignal | null = null;
    let calling = false;
    try {
      for (;;) {
        const paused = await this.runPendingCalls(turn);
        if (paused) return paused;
        const call = turn.next ?? (await this.reserveAndStart(turn));
        turn.next = null;
        timeout = call.timeout;
        stepText = '';
        calling = true;
        let usage: ChatUsage = { inputTokens: 0, outputTokens: 0 };
        let calls: ModelToolCall[] = [];
        if (call.stream) {
          let first = true;
          let next = await call.stream.head;
          try {
            for (; !next.done; next = await call.stream.parts.next()) {
              const part = next.value;
              if (first && part.type !== 'finish') {
                first = false;
                this.observer.firstToken((performance.now() - call.startedAt) / 1000);
              }
              if (part.type === 'delta') {
                stepText += part.text;
                hooks.onDelta?.(part.text);
              } else if (part.type === 'tool-call') calls.push(part.call);
              else usage = part.usage;
            }
          } finally {
            // Left early (an error here): the provider's stream is closed, as `for await` would.
            if (!next.done) void call.stream.parts.return?.().catch(() => undefined);
          }
        } else {
          ({ text: stepText, usage, toolCalls: calls } = await (call.result as Promise<ChatResult>));
        }
        // A tool call from a model that was offered none is not run (nor answered).
        if (call.offered.length === 0) calls = [];
        calling = false;
        const step = addStep(turn, stepText, usage, calls, this.observer);
        stepText = '';
        if (calls.length === 0)
          return { message: turn.message, reply: await this.writes.complete(turn, step), failure: null, approval: null };
        await this.writes.recordStep(turn, step);
      }
    } catch (error) {
      if (turn.stop?.aborted) return stopTurn(turn, this.writes, this.observer, calling ? stepText : null);
      const failure =
        !calling && error instanceof ApiError && error.code === 'quota_exceeded'
          ? { code: 'quota_exceeded' as const, error: error.message }
          : timeout?.aborted
            ? { code: 'model_provider_timeout' as const, error: `no answer within ${this.timeoutMs} ms` }
            : hooks.signal.aborted
              ? { code: 'cancelled' as const, error: 'the client closed the connection' }
              : error instanceof ModelProviderFailure
                ? { code: 'model_provider_error' as const, error: error.message }
                : null;
      if (!failure) throw error;
      return {
        message: turn.message,
        reply: await this.writes.fail(turn.userId, turn.reply, model.info.id, contentOf(turn.parts) + stepText, failure),
        failure,
        approval: null,
      };
    }
  }

  /**
   * Starts a later model call of the turn, its bound reserved first against the quotas that apply
   * (a deployment's model only): `402 quota_exceeded` when one has no room, before the model is called.
   */
  private async reserveAndStart(turn: Turn): Promise<StartedStep> {
    if (turn.model.connectionId === null) {
      await this.billing.release(turn.hold);
      turn.hold = null;
      const inputTokens = promptTokenBound([...turn.prompt, ...promptOfParts(turn.parts)]);
      turn.hold = await this.billing.reserve(turn.userId, {
        model: turn.model.info,
        usage: { inputTokens, outputTokens: RESERVED_OUTPUT_TOKENS },
      });
    }
    return this.start(turn);
  }

  /**
   * Runs the turn's tool calls that have no result yet, in order: a `deny` tool or one the caller
   * does not have is answered at once; an `approval_required` one pauses the turn (unless decided).
   * Resolves with the paused outcome, or null when every call has its result.
   */
  private async runPendingCalls(turn: Turn): Promise<SendOutcome | null> {
    const answered = new Set(turn.parts.filter((p): p is ToolResultPart => p.type === 'tool-result').map((p) => p.toolCallId));
    const pending = turn.parts.filter((p): p is ToolCallPart => p.type === 'tool-call' && !answered.has(p.toolCallId));
    const answer = (call: ToolCallPart, outcome: 'not_found' | 'error' | 'denied', output: string) =>
      addResult(turn, call, { outcome, output, isError: true, truncated: false }, this.observer);
    for (const call of pending) {
      const definition: ToolDefinition | undefined = turn.tools?.find(call.toolName);
      const decision = turn.decisions.get(call.toolCallId);
      const down = definition ? unavailableIn(turn.parts).get(serverOf(definition) ?? '') : undefined;
      if (!definition || !turn.tools) {
        answer(call, 'not_found', `There is no tool named ${call.toolName}.`);
      } else if (down) {
        // Its server failed earlier in the turn: not called again (nor asked for approval).
        answer(call, 'error', `The MCP server "${down.serverName}" is unavailable in this turn (${down.reason}). The call did not run.`);
      } else if (definition.policy === 'deny') {
        answer(call, 'denied', `The tool ${call.toolName} is not allowed: its policy is deny. It did not run.`);
      } else if (decision && !decision.approve) {
        answer(call, 'denied', `The user denied this call of ${call.toolName}. It did not run.`);
      } else if (definition.policy === 'approval_required' && !decision) {
        return this.writes.pause(turn, call);
      } else {
        const result = await turn.tools.run(call.toolName, decision ? decision.arguments : call.arguments, turn.hooks.signal);
        addResult(turn, call, result, this.observer);
      }
    }
    return null;
  }
}
