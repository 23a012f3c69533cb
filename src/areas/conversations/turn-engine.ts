import { ApiError, errors } from '../../platform/errors';
import type { RequestInput } from '../../platform/api-types';
import { type ChatResult, type ChatUsage, type ModelToolCall, ModelProviderFailure } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import type { BudgetGate } from '../billing/service';
import type { ModelService, ResolvedModel } from '../models/service';
import type { ToolDefinition } from '../tools/service';
import { type Attachments, userContent, withDocuments } from './attachments';
import { type Grounder, groundingOfCitations } from './grounding';
import type { ReplyLeases } from './leases';
import { buildPrompt, promptOfParts, type TurnContexts } from './prompt';
import type { ReplyWrites } from './reply-writes';
import * as repo from './repository';
import type { ConversationService } from './service';
import { type ConversationTitler, titleFrom } from './titles';
import {
  addResult,
  addStep,
  addUnavailable,
  type ChatObserver,
  contentOf,
  type MessagePart,
  type SendHooks,
  type SendOutcome,
  serverOf,
  type StartedStep,
  type ToolCallPart,
  type ToolResultPart,
  toSpec,
  type Turn,
  unavailableIn,
} from './turn';

type SendInput = RequestInput<'MessageCreateRequest'>;

export interface TurnEngineDeps {
  db: Database;
  models: Pick<ModelService, 'resolve' | 'resolver'>;
  conversations: Pick<ConversationService, 'get'>;
  billing: Pick<BudgetGate, 'requireBudget'>;
  /** How long a model call may take. */
  timeoutMs: number;
  /** The most model calls in one turn; the last is made without tools, so the turn ends with an answer. */
  maxSteps: number;
  contexts: TurnContexts;
  grounder: Grounder;
  attachments: Attachments;
  writes: ReplyWrites;
  leases: ReplyLeases;
  observer: ChatObserver;
  /** Names a conversation with its model after the first exchange. */
  titles: Pick<ConversationTitler, 'afterReply' | 'afterResumed'>;
}

/**
 * Chat turns: a user message and the model's reply (whole or streamed) through the provider
 * interface, with the tool calls the model makes, run step by step until it answers, a call waits
 * for approval, or the model fails; and the turns continued after a decision.
 */
export class TurnEngine {
  private readonly db: Database;
  private readonly models: Pick<ModelService, 'resolve' | 'resolver'>;
  private readonly conversations: Pick<ConversationService, 'get'>;
  private readonly billing: Pick<BudgetGate, 'requireBudget'>;
  private readonly timeoutMs: number;
  private readonly maxSteps: number;
  private readonly contexts: TurnContexts;
  private readonly grounder: Grounder;
  private readonly attachments: Attachments;
  private readonly writes: ReplyWrites;
  private readonly leases: ReplyLeases;
  private readonly observer: ChatObserver;
  private readonly titles: Pick<ConversationTitler, 'afterReply' | 'afterResumed'>;

  constructor(deps: TurnEngineDeps) {
    const { db, models, conversations, billing, timeoutMs, maxSteps, contexts, grounder, writes, leases, observer } = deps;
    this.db = db;
    this.models = models;
    this.conversations = conversations;
    this.billing = billing;
    this.timeoutMs = timeoutMs;
    this.maxSteps = maxSteps;
    this.contexts = contexts;
    this.grounder = grounder;
    this.attachments = deps.attachments;
    this.writes = writes;
    this.leases = leases;
    this.observer = observer;
    this.titles = deps.titles;
  }

  /**
   * Stores the user's message and a reply being generated, asks the model, and stores the reply's
   * outcome. A provider failure, timeout or cancellation is an outcome (`failure`), not an error.
   */
  async send(userId: string, input: SendInput, hooks: SendHooks): Promise<SendOutcome> {
    const now = new Date();
    const messageId = uuidv7(now.getTime());
    const replyId = uuidv7(now.getTime());
    // The time to the first token is the sum of the turn's round trips before the model call, so
    // each read starts as soon as what it depends on is known: the history, the caller's tools,
    // settings, models and budget with the conversation (none is used unless the conversation is
    // the caller's); its project and the relevant memory once it is read. A read's failure
    // surfaces where it is awaited.
    const early = this.contexts.startReads(userId, input.conversationId, messageId);
    early.history.catch(() => undefined);
    early.tools.catch(() => undefined);
    // The budget applies only to the deployment's models (usage on the user's own key is not
    // charged to it), so its answer is used once the model is known.
    const budget = this.billing.requireBudget(userId).then(
      () => null,
      (error: unknown) => error,
    );
    const knowledgeRead = this.grounder.sources(userId, input.knowledge);
    knowledgeRead.catch(() => undefined);
    const resolveModel = this.models.resolver(userId);
    const conversation = await this.conversations.get(userId, input.conversationId);
    if (conversation.archived) throw errors.conflict('The conversation is archived; unarchive it to continue.');
    const context = this.contexts.read(userId, conversation, input.content, early);
    context.catch(() => undefined);
    // The message's model; else the conversation's, or the default when it has none or it is gone
    // (a blocked one is refused).
    const [model, knowledge] = await Promise.all([
      resolveModel(input.model ?? conversation.model, 'chat', { fallback: input.model === undefined }),
      knowledgeRead,
    ]);
    if (model.connectionId === null) {
      const refused = await budget;
      if (refused) throw refused;
    }
    // Checked (and read) before anything is stored: a refused attachment leaves no message.
    const attached = await this.attachments.prepare(userId, input.attachments, model);
    const base = { conversation_id: conversation.id, owner_user_id: userId, created_at: now, updated_at: now };
    // The turn is stored while its sources are searched and the model is asked: the model's
    // first token never waits for the write, and nothing is streamed before it is committed. The
    // reply counts as this instance's from the start (see `ReplyLeases.interruptGenerating`).
    this.leases.hold(replyId);
    try {
      const stored = repo.insertTurn(
        this.db,
        {
          ownerUserId: userId,
          id: conversation.id,
          changes: { updated_at: now, ...(conversation.title === '' ? { title: titleFrom(input.content) } : {}) },
        },
        {
          ...base,
          id: messageId,
          role: 'user',
          kind: 'message',
          content: input.content,
          status: 'complete',
          attachments: JSON.stringify(attached?.stored ?? []),
        },
        { ...base, id: replyId, role: 'assistant', kind: 'reply', status: 'generating', model: model.info.id },
        this.leases.leaseMs,
      );
      const started = stored.then(([message]) => hooks.onStart?.(message));
      this.leases.storingTurn(started);
      const [read, grounding] = await Promise.all([
        context,
        knowledge ? this.grounder.ground(userId, replyId, input.content, knowledge) : null,
      ]);
      // Attached documents are numbered sources before the knowledge a grounded turn found.
      const sources = withDocuments(grounding, attached?.documents ?? []);
      const turn: Omit<Turn, 'message' | 'reply'> = {
        userId,
        model,
        prompt: buildPrompt(read, userContent(input.content, attached?.images), sources.grounding),
        tools: read.tools,
        parts: [],
        usage: { inputTokens: 0, outputTokens: 0 },
        cost: 0,
        steps: 0,
        hooks,
        decisions: new Map(),
        next: null,
      };
      const first = this.startStep(turn);
      let message: repo.MessageRow;
      let reply: repo.MessageRow;
      try {
        [[message, reply]] = await Promise.all([stored, started]);
        if (sources.citations.length) await repo.setReplyCitations(this.db, reply.id, JSON.stringify(sources.citations));
      } catch (error) {
        first.abort();
        throw error;
      }
      if (grounding) hooks.onCitations?.(sources.citations, grounding.retrieval);
      const stepping: Turn = { ...turn, message, reply, next: first };
      addUnavailable(stepping, read.tools?.unavailable ?? []);
      const outcome = await this.runTurn(stepping);
      // The first exchange of an untitled conversation: its model-written title follows in the background.
      if (conversation.title === '' && !conversation.temporary) this.titles.afterReply(outcome.reply, input.content);
      return outcome;
    } finally {
      // A reply left generating here (an unexpected error) is failed by a sweep once its lease ends.
      this.leases.release(replyId);
    }
  }

  /**
   * Continues a turn resumed by a decision on its approval (the reply generating again, held by
   * the caller's lease), to its next stop; returns the reply as it then is.
   */
  async resume(userId: string, reply: repo.MessageRow, approval: repo.ApprovalRow, approve: boolean): Promise<repo.MessageRow> {
    const conversation = await repo.findConversation(this.db, userId, reply.conversation_id);
    const message = conversation ? await repo.userMessageBefore(this.db, conversation.id, reply.id) : undefined;
    if (!conversation || !message) return (await repo.findMessage(this.db, reply.id)) ?? reply;
    let model: ResolvedModel;
    try {
      model = await this.models.resolve(userId, reply.model, 'chat', { fallback: true });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return this.writes.fail(userId, reply, reply.model ?? '', reply.content, {
        code: 'model_provider_error',
        error: `The reply's model cannot be called: ${error.message}`,
      });
    }
    // The budget may have run out while the turn waited (its first steps were charged, or other
    // spending meanwhile): the continued turn calls the model again, so it is checked again.
    if (model.connectionId === null && !(await this.hasBudget(userId))) {
      const error = approve
        ? 'The budget for this period was spent while the reply waited for approval: the approved call did not run and the reply ended.'
        : 'The budget for this period was spent while the reply waited for approval: the reply ended after the denial.';
      return this.writes.fail(userId, reply, model.info.id, reply.content, { code: 'budget_exhausted', error });
    }
    // A grounded reply keeps its sources (its stored citations).
    const grounding = groundingOfCitations(reply.citations);
    const [read, images] = await Promise.all([
      this.contexts.read(userId, conversation, message.content, this.contexts.startReads(userId, conversation.id, message.id)),
      this.attachments.imagesOf(userId, message.attachments, model),
    ]);
    const turn: Turn = {
      userId,
      model,
      reply,
      message,
      prompt: buildPrompt(read, userContent(message.content, images), grounding),
      tools: read.tools,
      parts: reply.parts as unknown as MessagePart[],
      usage: { inputTokens: reply.input_tokens ?? 0, outputTokens: reply.output_tokens ?? 0 },
      cost: Number(reply.cost_micro_cents ?? 0),
      steps: reply.model_calls,
      hooks: { signal: new AbortController().signal },
      decisions: new Map([[approval.tool_call_id, { approve, arguments: approval.arguments as Record<string, unknown> }]]),
      next: null,
    };
    addUnavailable(turn, read.tools?.unavailable ?? []);
    const ended = (await this.runTurn(turn)).reply;
    this.titles.afterResumed(conversation, message, ended);
    return ended;
  }

  /** Whether the caller may still spend on the deployment's models (false: `requireBudget` would answer 402). */
  private async hasBudget(userId: string): Promise<boolean> {
    try {
      await this.billing.requireBudget(userId);
      return true;
    } catch (error) {
      if (error instanceof ApiError && error.code === 'budget_exhausted') return false;
      throw error;
    }
  }

  /**
   * Starts a turn's next model call (its request is on its way when this returns): the turn's
   * prompt and parts so far, and the tools it may still call. The last step is asked without
   * tools, so that the turn ends with an answer; a server found unavailable in the turn is not
   * offered again.
   */
  private startStep(turn: Omit<Turn, 'message' | 'reply'>): StartedStep {
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
  private async runTurn(turn: Turn): Promise<SendOutcome> {
    const { hooks, model } = turn;
    let stepText = '';
    let timeout: AbortSignal | null = null;
    try {
      for (;;) {
        const paused = await this.runPendingCalls(turn);
        if (paused) return paused;
        const call = turn.next ?? this.startStep(turn);
        turn.next = null;
        timeout = call.timeout;
        stepText = '';
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
        const step = addStep(turn, stepText, usage, calls, this.observer);
        stepText = '';
        if (calls.length === 0)
          return { message: turn.message, reply: await this.writes.complete(turn, step), failure: null, approval: null };
        await this.writes.recordStep(turn, step);
      }
    } catch (error) {
      const failure = timeout?.aborted
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
