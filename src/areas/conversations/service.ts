import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { Transaction } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import { ApiError, errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import {
  type ChatMessage,
  type ChatPart,
  type ChatResult,
  type ChatUsage,
  type ModelToolCall,
  ModelProviderFailure,
  type ToolSpec,
} from '../../platform/ai/models';
import type { Actor, AuditService } from '../audit/service';
import type { ToolDefinition, ToolRunResult, ToolService, TurnTools, UnavailableSource } from '../tools/service';
import { type Database, type DB, PgError, pgErrorCode } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import { whileUnreachable } from '../../platform/reconnect';
import { type Grounding, groundingBlock } from '../../platform/ai/grounding';
import type { KnowledgeService } from '../knowledge/service';
import type { MemoryService } from '../memory/service';
import type { SettingsService } from '../settings/service';
import type { ModelService, ResolvedModel } from '../models/service';
import type { ProjectService } from '../projects/service';
import type { SkillService } from '../skills/service';
import type { BudgetGate } from '../billing/service';
import { costMicroCents, presentUsage } from '../../platform/usage';
import type { Schemas } from '../../platform/api-types';
import type { WebhookService } from '../webhooks/service';
import { presentCitations, type StoredCitation } from './presenter';
import * as repo from './repository';

type CreateInput = RequestInput<'ConversationCreateRequest'>;
type UpdateInput = RequestInput<'ConversationUpdateRequest'>;
type SendInput = RequestInput<'MessageCreateRequest'>;
/** The knowledge sources a grounded turn searches. */
type KnowledgeSources = Array<'files' | 'memory' | 'notes' | 'projects'>;

/** What a turn's prompt is read from (`turnContext`). */
interface TurnContext {
  project: { name: string; instructions: string | null } | null;
  memory: Array<{ content: string }>;
  history: Array<{ role: string; content: string }>;
  tools: TurnTools | null;
}

export type FailureCode = 'model_provider_error' | 'model_provider_timeout' | 'cancelled' | 'budget_exhausted';

export type MessagePart = Schemas['MessagePart'];
type ToolCallPart = Schemas['ToolCallPart'];
type ToolResultPart = Schemas['ToolResultPart'];
type UnavailablePart = Schemas['ToolSourceUnavailablePart'];

/** How chat turns use tools. */
export interface ChatToolSettings {
  /** Whether turns offer the caller's tools to the model at all (CHAT_TOOLS). */
  enabled: boolean;
  /** The most model calls in one turn; the last is made without tools, so the turn ends with an answer. */
  maxSteps: number;
  /** How long an approval waits for the user's decision. */
  approvalTtlMs: number;
}

/** What the chat service reports to the metrics. */
export interface ChatObserver {
  /** Seconds from a streamed model call to its first text or tool call. */
  firstToken(seconds: number): void;
  /** Seconds an approval waited for its decision. */
  approvalWait(seconds: number, decision: 'approve' | 'deny'): void;
  /** A tool call's outcome (`tool` is `unknown` for a name the caller has no tool by). */
  toolCall(tool: string, outcome: ToolRunResult['outcome']): void;
}

export const APPROVAL_DECIDE_ACTION = 'tool.approval.decide';

/** How a reply's instance holds it while generating it (see `ChatService.recoverInterrupted`). */
export interface ReplyLeaseSettings {
  /** How long a reply's lease lasts; renewed at a third of it while the reply is generated. */
  leaseMs: number;
}

export interface SendOutcome {
  message: repo.MessageRow;
  reply: repo.MessageRow;
  failure: { code: FailureCode; error: string } | null;
  /** The approval the turn paused for (the reply is `awaiting_approval`), or null. */
  approval: repo.ApprovalRow | null;
}

/** SHA-256 (hex) of the RFC 8785 canonical JSON of `args` (what approvals are bound to). */
export const argumentsDigest = (args: unknown) =>
  createHash('sha256')
    .update(canonicalize(args) ?? 'null')
    .digest('hex');

export interface SendHooks {
  /** The client went away: cancels the reply. */
  signal: AbortSignal;
  /** The user message is stored and the reply begins. */
  onStart?: (message: repo.MessageRow) => void;
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

/** How a grounded turn went, for the metrics: sources given, none matched, or the search failed. */
export type GroundingOutcome = 'grounded' | 'empty' | 'failed';

/** A grounded turn's sources: what the prompt gives the model and what the reply cites. */
interface TurnGrounding {
  grounding: Grounding;
  citations: StoredCitation[];
  retrieval: 'hybrid' | 'lexical' | 'failed';
}

/** A turn in progress: the reply's parts and usage so far, and what it runs with. */
interface Turn {
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
  /** Decisions on approvals, by tool call id (a continued turn's). */
  decisions: Map<string, { approve: boolean; arguments: Record<string, unknown> }>;
  /** The model call already started for the turn's next step, if any. */
  next: StartedStep | null;
}

/** A model call on its way: its parts (streamed) or its result, and what it was asked with. */
interface StartedStep {
  offered: ToolSpec[];
  timeout: AbortSignal;
  startedAt: number;
  /** Ends the call (its turn could not be stored). */
  abort: () => void;
  stream: { head: Promise<IteratorResult<ChatPart>>; parts: AsyncIterator<ChatPart> } | null;
  result: Promise<ChatResult> | null;
}

const HISTORY_MESSAGES = 20;
const MEMORY_ITEMS = 5;
const TITLE_LENGTH = 60;
const SYSTEM_PROMPT = 'You are the assistant of an AI workspace. Answer in Markdown.';
const INTERRUPTED = 'The instance writing the reply stopped before it ended.';
const APPROVAL_EXPIRED = 'The tool call the reply waited on was not approved or denied in time.';
const INTERRUPT_BATCH = 100;
/** A grounded turn gives the model at most this many sources… */
export const GROUNDING_SOURCES = 5;
/** …of at most this many characters of passages in all… */
export const GROUNDING_CHARS = 6000;
/** …and this many per source; a source that would get fewer than GROUNDING_MIN_CHARS is left out. */
const GROUNDING_SOURCE_CHARS = 2000;
const GROUNDING_MIN_CHARS = 200;

/** `text` cut to at most `max` characters, at a word where it can, marked with … when cut. */
const cutText = (text: string, max: number) => {
  const trimmed = text.trim();
  if (trimmed.length <= max) return trimmed;
  const head = trimmed.slice(0, max - 1);
  const space = head.lastIndexOf(' ');
  return `${space > max / 2 ? head.slice(0, space) : head}…`;
};

/** The title a first message gives an untitled conversation. */
const titleFrom = (content: string) => {
  const line = content.trim().replace(/\s+/g, ' ');
  return line.length <= TITLE_LENGTH ? line : `${line.slice(0, TITLE_LENGTH - 1)}…`;
};

/** What a ChatService is built from. */
export interface ChatServiceDeps {
  db: Database;
  models: Pick<ModelService, 'resolve' | 'resolver' | 'check'>;
  projects: ProjectService;
  skills: SkillService;
  webhooks: WebhookService;
  timeoutMs: number;
  billing: BudgetGate;
  lease: ReplyLeaseSettings;
  memory: Pick<MemoryService, 'relevant'>;
  /** Grounded turns retrieve the caller's knowledge through it. */
  knowledge: Pick<KnowledgeService, 'passages'>;
  /** The caller's `knowledgeInChat` and `memoryInChat`. */
  settings: Pick<SettingsService, 'get'>;
  /** Logs at warn level (a failed knowledge retrieval). */
  warn?: (message: string, meta: Record<string, unknown>) => void;
  /** Called once per grounded turn (metrics). */
  onGrounded?: (outcome: GroundingOutcome, sources: number) => void;
  /** The tool registry (null: turns use no tools). */
  tools?: Pick<ToolService, 'forTurn'> | null;
  toolSettings?: ChatToolSettings;
  audit?: Pick<AuditService, 'record'>;
  observer?: ChatObserver;
}

const NO_TOOLS: ChatToolSettings = { enabled: false, maxSteps: 1, approvalTtlMs: 3_600_000 };
const NOT_OBSERVED: ChatObserver = { firstToken: () => undefined, approvalWait: () => undefined, toolCall: () => undefined };

/**
 * Conversations and chat: a user message, the model's reply (whole or streamed) through the
 * provider interface, its usage in the usage ledger, and `chat.completed` / `chat.failed` in the
 * webhook outbox, written in the same transaction as the reply's final state.
 */
export class ChatService {
  private readonly db: Database;
  private readonly models: Pick<ModelService, 'resolve' | 'resolver' | 'check'>;
  private readonly projects: ProjectService;
  private readonly skills: SkillService;
  private readonly webhooks: WebhookService;
  private readonly timeoutMs: number;
  private readonly billing: BudgetGate;
  private readonly lease: ReplyLeaseSettings;
  private readonly memory: Pick<MemoryService, 'relevant'>;
  private readonly knowledge: Pick<KnowledgeService, 'passages'>;
  private readonly settings: Pick<SettingsService, 'get'>;
  private readonly warn: NonNullable<ChatServiceDeps['warn']>;
  private readonly onGrounded: NonNullable<ChatServiceDeps['onGrounded']>;

  private tools: Pick<ToolService, 'forTurn'> | null;
  private readonly toolSettings: ChatToolSettings;
  private readonly audit: Pick<AuditService, 'record'> | null;
  private readonly observer: ChatObserver;

  constructor({
    db,
    models,
    projects,
    skills,
    webhooks,
    timeoutMs,
    billing,
    lease,
    memory,
    knowledge,
    settings,
    warn,
    onGrounded,
    tools,
    toolSettings,
    audit,
    observer,
  }: ChatServiceDeps) {
    this.tools = tools ?? null;
    this.toolSettings = toolSettings ?? NO_TOOLS;
    this.audit = audit ?? null;
    this.observer = observer ?? NOT_OBSERVED;
    this.db = db;
    this.models = models;
    this.projects = projects;
    this.skills = skills;
    this.webhooks = webhooks;
    this.timeoutMs = timeoutMs;
    this.billing = billing;
    this.lease = lease;
    this.memory = memory;
    this.knowledge = knowledge;
    this.settings = settings;
    this.warn = warn ?? (() => undefined);
    this.onGrounded = onGrounded ?? (() => undefined);
  }

  /** Sets the tool registry turns use (built after this service: its built-in tools use areas that use chat). */
  useTools(tools: Pick<ToolService, 'forTurn'>): void {
    this.tools = tools;
  }

  /** The replies this instance is generating: their leases are renewed while they are. */
  private readonly generating = new Set<string>();
  /** The inserts of turns this instance has begun, until they are committed (or refused). */
  private readonly storing = new Set<Promise<unknown>>();

  async get(userId: string, conversationId: string): Promise<repo.ConversationRow> {
    const row = await repo.findConversation(this.db, userId, conversationId);
    if (!row) throw errors.notFound('Conversation not found.');
    return row;
  }

  /** Throws 404 naming the body `field` unless `conversationId` is one of the caller's (used by other areas). */
  async requireOwned(userId: string, conversationId: string, field = 'conversationId'): Promise<void> {
    if (!(await repo.findConversation(this.db, userId, conversationId))) throw errors.referenceNotFound(field, 'Conversation not found.');
  }

  async list(userId: string, filter: { projectId?: string; archived?: boolean }, page: PageRequest) {
    return repo.conversationList.page(this.db, { ownerUserId: userId, ...filter }, page);
  }

  async create(userId: string, input: CreateInput): Promise<repo.ConversationRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    if (input.model !== undefined) await this.models.check(userId, input.model, 'chat');
    const now = new Date();
    return repo.insertConversation(this.db, {
      id: uuidv7(now.getTime()),
      owner_user_id: userId,
      project_id: input.projectId ?? null,
      title: input.title ?? '',
      model: input.model ?? null,
      created_at: now,
      updated_at: now,
    });
  }

  async update(userId: string, input: UpdateInput): Promise<repo.ConversationRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    if (input.model !== undefined && input.model !== null) await this.models.check(userId, input.model, 'chat');
    const updated = await repo.updateConversation(this.db, userId, input.conversationId, {
      title: input.title,
      project_id: input.projectId,
      archived: input.archived,
      model: input.model,
      updated_at: new Date(),
    });
    if (!updated) throw errors.notFound('Conversation not found.');
    return updated;
  }

  async delete(userId: string, conversationId: string): Promise<void> {
    if (!(await repo.deleteConversation(this.db, userId, conversationId))) throw errors.notFound('Conversation not found.');
  }

  async messages(userId: string, conversationId: string, page: PageRequest) {
    await this.get(userId, conversationId);
    return repo.messageList.page(this.db, { conversationId }, page);
  }

  /** The agent's (skill's) greeting in the conversation, posted once. */
  async greet(userId: string, conversationId: string, agentId: string): Promise<repo.MessageRow> {
    const conversation = await this.get(userId, conversationId);
    const skill = await this.skills.get(userId, agentId).catch((error: unknown) => {
      if (error instanceof ApiError && error.status === 404)
        throw errors.referenceNotFound('agentId', 'Agent not found: agentId must be one of your skills.');
      throw error;
    });
    const existing = await repo.findGreeting(this.db, conversation.id, skill.id);
    if (existing) return existing;
    const now = new Date();
    const content =
      skill.greeting.trim() !== '' ? skill.greeting : `Hi, I'm ${skill.name}.${skill.description ? ` ${skill.description}` : ''}`;
    try {
      return await this.db.transaction().execute(async (trx) => {
        const message = await repo.insertMessage(trx, {
          id: uuidv7(now.getTime()),
          conversation_id: conversation.id,
          owner_user_id: userId,
          role: 'assistant',
          kind: 'greeting',
          content,
          status: 'complete',
          agent_id: skill.id,
          created_at: now,
          updated_at: now,
        });
        await repo.updateConversation(trx, userId, conversation.id, { updated_at: now });
        return message;
      });
    } catch (error) {
      // The same greeting posted by a concurrent call: answer that one.
      if (pgErrorCode(error) !== PgError.uniqueViolation) throw error;
      return (await repo.findGreeting(this.db, conversation.id, skill.id)) as repo.MessageRow;
    }
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
    const early = { history: repo.history(this.db, input.conversationId, messageId, HISTORY_MESSAGES), tools: this.turnTools(userId) };
    early.history.catch(() => undefined);
    early.tools.catch(() => undefined);
    // The budget applies only to the deployment's models (usage on the user's own key is not
    // charged to it), so its answer is used once the model is known.
    const budget = this.billing.requireBudget(userId).then(
      () => null,
      (error: unknown) => error,
    );
    const knowledgeRead = this.knowledgeSources(userId, input.knowledge);
    knowledgeRead.catch(() => undefined);
    const resolveModel = this.models.resolver(userId);
    const conversation = await this.get(userId, input.conversationId);
    if (conversation.archived) throw errors.conflict('The conversation is archived; unarchive it to continue.');
    const context = this.turnContext(userId, conversation, input.content, messageId, early);
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
    const base = { conversation_id: conversation.id, owner_user_id: userId, created_at: now, updated_at: now };
    // The turn is stored while its sources are searched and the model is asked: the model's
    // first token never waits for the write, and nothing is streamed before it is committed. The
    // reply counts as this instance's from the start (see `interruptGenerating`).
    this.generating.add(replyId);
    try {
      const stored = repo.insertTurn(
        this.db,
        {
          ownerUserId: userId,
          id: conversation.id,
          changes: { updated_at: now, ...(conversation.title === '' ? { title: titleFrom(input.content) } : {}) },
        },
        { ...base, id: messageId, role: 'user', kind: 'message', content: input.content, status: 'complete' },
        { ...base, id: replyId, role: 'assistant', kind: 'reply', status: 'generating', model: model.info.id },
        this.lease.leaseMs,
      );
      this.storing.add(stored);
      const started = stored.then(([message]) => hooks.onStart?.(message));
      started.catch(() => undefined).finally(() => this.storing.delete(stored));
      const [read, grounding] = await Promise.all([context, knowledge ? this.ground(userId, replyId, input.content, knowledge) : null]);
      const turn: Omit<Turn, 'message' | 'reply'> = {
        userId,
        model,
        prompt: this.prompt(read, input.content, grounding?.grounding),
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
        if (grounding?.citations.length) await repo.setReplyCitations(this.db, reply.id, JSON.stringify(grounding.citations));
      } catch (error) {
        first.abort();
        throw error;
      }
      if (grounding) hooks.onCitations?.(grounding.citations, grounding.retrieval);
      const stepping: Turn = { ...turn, message, reply, next: first };
      this.addUnavailable(stepping, read.tools?.unavailable ?? []);
      return await this.runTurn(stepping);
    } finally {
      // A reply left generating here (an unexpected error) is failed by a sweep once its lease ends.
      this.generating.delete(replyId);
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
      turn.tools && turn.steps < this.toolSettings.maxSteps - 1
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

  /** The caller's tools for a turn, or null when turns use none. */
  private async turnTools(userId: string): Promise<TurnTools | null> {
    if (!this.tools || !this.toolSettings.enabled) return null;
    return this.tools.forTurn(userId);
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
        const step = this.addStep(turn, stepText, usage, calls);
        stepText = '';
        if (calls.length === 0) return { message: turn.message, reply: await this.complete(turn, step), failure: null, approval: null };
        await this.recordStep(turn, step);
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
        reply: await this.fail(turn.userId, turn.reply, model.info.id, contentOf(turn.parts) + stepText, failure),
        failure,
        approval: null,
      };
    }
  }

  /** Adds a model call's text and tool calls to the turn; returns the step's usage and cost. */
  private addStep(turn: Turn, text: string, usage: ChatUsage, calls: ModelToolCall[]) {
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
        this.addResult(turn, part, { outcome: 'error', output: 'The arguments must be a JSON object.', isError: true, truncated: false });
    }
    const index = turn.steps;
    turn.steps += 1;
    const cost = turn.model.connectionId === null ? costMicroCents(turn.model.info, usage) : 0;
    turn.usage = { inputTokens: turn.usage.inputTokens + usage.inputTokens, outputTokens: turn.usage.outputTokens + usage.outputTokens };
    turn.cost += cost;
    return { index, usage };
  }

  private addResult(turn: Turn, call: ToolCallPart, result: ToolRunResult): void {
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
    this.observer.toolCall(turn.tools?.find(call.toolName) ? call.toolName : 'unknown', result.outcome);
    turn.hooks.onToolResult?.(part);
    if (result.unavailable) this.addUnavailable(turn, [result.unavailable]);
  }

  /** Records in the reply the sources the turn goes on without (each server once per reply). */
  private addUnavailable(turn: Turn, sources: UnavailableSource[]): void {
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
  private stepResource(turn: Turn, index: number) {
    return index === 0 ? turn.reply.id : `${turn.reply.id}:${index + 1}`;
  }

  /**
   * A turn's write of its reply's progress or outcome, in a transaction, tried again while the
   * database cannot be reached, for up to the reply's lease (which this instance renews again as
   * soon as it can): a turn that outlives a database restart ends as it would have, instead of
   * being left `generating`. Each write is guarded by the reply's state, so a repeat of one that
   * committed changes (and charges) nothing.
   */
  private turnWrite<T>(write: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
    return whileUnreachable(() => this.db.transaction().execute(write), { forMs: this.lease.leaseMs });
  }

  /** Stores a step that called tools (parts and usage so far) and charges it. */
  private async recordStep(turn: Turn, step: { index: number; usage: ChatUsage }): Promise<void> {
    await this.turnWrite(async (trx) => {
      const now = new Date();
      const stored = await repo.updateGenerating(trx, turn.reply.id, { ...this.progress(turn), updated_at: now });
      // Ended meanwhile (interrupted after its lease, or its conversation deleted): nothing to charge to it.
      if (!stored) return;
      const { model } = turn;
      await this.billing.charge(trx, {
        userId: turn.userId,
        kind: 'chat.reply',
        resourceId: this.stepResource(turn, step.index),
        model: model.info,
        connectionId: model.connectionId,
        usage: step.usage,
        at: now,
      });
    });
  }

  /** The columns recording a turn's progress. */
  private progress(turn: Turn) {
    return {
      content: contentOf(turn.parts),
      parts: JSON.stringify(turn.parts),
      model_calls: turn.steps,
      input_tokens: turn.usage.inputTokens,
      output_tokens: turn.usage.outputTokens,
      cost_micro_cents: turn.cost,
    };
  }

  /**
   * Runs the turn's tool calls that have no result yet, in order: a `deny` tool or one the caller
   * does not have is answered at once; an `approval_required` one pauses the turn (unless decided).
   * Resolves with the paused outcome, or null when every call has its result.
   */
  private async runPendingCalls(turn: Turn): Promise<SendOutcome | null> {
    const answered = new Set(turn.parts.filter((p): p is ToolResultPart => p.type === 'tool-result').map((p) => p.toolCallId));
    const pending = turn.parts.filter((p): p is ToolCallPart => p.type === 'tool-call' && !answered.has(p.toolCallId));
    for (const call of pending) {
      const definition: ToolDefinition | undefined = turn.tools?.find(call.toolName);
      const decision = turn.decisions.get(call.toolCallId);
      const down = definition ? unavailableIn(turn.parts).get(serverOf(definition) ?? '') : undefined;
      if (!definition || !turn.tools) {
        this.addResult(turn, call, {
          outcome: 'not_found',
          output: `There is no tool named ${call.toolName}.`,
          isError: true,
          truncated: false,
        });
      } else if (down) {
        // Its server failed earlier in the turn: not called again (nor asked for approval).
        const output = `The MCP server "${down.serverName}" is unavailable in this turn (${down.reason}). The call did not run.`;
        this.addResult(turn, call, { outcome: 'error', output, isError: true, truncated: false });
      } else if (definition.policy === 'deny') {
        this.addResult(turn, call, {
          outcome: 'denied',
          output: `The tool ${call.toolName} is not allowed: its policy is deny. It did not run.`,
          isError: true,
          truncated: false,
        });
      } else if (decision && !decision.approve) {
        this.addResult(turn, call, {
          outcome: 'denied',
          output: `The user denied this call of ${call.toolName}. It did not run.`,
          isError: true,
          truncated: false,
        });
      } else if (definition.policy === 'approval_required' && !decision) {
        return this.pause(turn, call);
      } else {
        this.addResult(turn, call, await turn.tools.run(call.toolName, decision ? decision.arguments : call.arguments, turn.hooks.signal));
      }
    }
    return null;
  }

  /** Pauses the turn for the user's decision on `call`: an approval, the reply `awaiting_approval`, `approval.requested`. */
  private async pause(turn: Turn, call: ToolCallPart): Promise<SendOutcome> {
    return this.turnWrite(async (trx) => {
      const now = new Date();
      const approvalId = uuidv7(now.getTime());
      call.approvalId = approvalId;
      const reply = await repo.pauseReply(trx, turn.reply.id, { ...this.progress(turn), updated_at: now });
      if (!reply) {
        // Ended meanwhile (interrupted, or its conversation deleted): nothing waits.
        const ended = (await repo.findMessage(trx, turn.reply.id)) ?? turn.reply;
        return { message: turn.message, reply: ended, failure: null, approval: null };
      }
      const approval = await repo.insertApproval(trx, {
        id: approvalId,
        user_id: turn.userId,
        conversation_id: reply.conversation_id,
        message_id: reply.id,
        tool_call_id: call.toolCallId,
        tool_name: call.toolName,
        arguments: JSON.stringify(call.arguments),
        arguments_digest: argumentsDigest(call.arguments),
        status: 'pending',
        created_at: now,
        expires_at: new Date(now.getTime() + this.toolSettings.approvalTtlMs),
      });
      await this.webhooks.emitEvent(trx, 'approval.requested', turn.userId, {
        approvalId: approval.id,
        conversationId: approval.conversation_id,
        messageId: approval.message_id,
        toolName: approval.tool_name,
        arguments: call.arguments,
        argumentsDigest: approval.arguments_digest,
        expiresAt: approval.expires_at.getTime(),
      });
      return { message: turn.message, reply, failure: null, approval };
    });
  }

  /** The caller's approval `approvalId` (404 when it is not theirs). */
  async approval(userId: string, approvalId: string): Promise<repo.ApprovalRow> {
    const row = await repo.findApproval(this.db, userId, approvalId);
    if (!row) throw errors.notFound('Approval not found.');
    return row;
  }

  /** A page of the caller's pending approvals. */
  pendingApprovals(userId: string, page: PageRequest) {
    return repo.pendingApprovalList.page(this.db, { userId, now: new Date() }, page);
  }

  /**
   * Decides the caller's pending approval once (audited), then continues the paused turn to its
   * next stop. Refused (and nothing runs): not theirs (404), decided (409), expired (410), other
   * arguments than the approval's (409).
   */
  async decide(
    actor: Actor,
    input: { approvalId: string; decision: 'approve' | 'deny'; arguments?: Record<string, unknown> },
  ): Promise<{ approval: repo.ApprovalRow; reply: repo.MessageRow }> {
    const userId = actor.userId;
    const found = await this.approval(userId, input.approvalId);
    const now = new Date();
    if (found.status === 'expired' || (found.status === 'pending' && found.expires_at.getTime() <= now.getTime()))
      throw errors.approvalExpired();
    if (found.status !== 'pending') throw errors.conflict(`This approval was already decided (${found.status}); a decision is single use.`);
    if (input.arguments !== undefined && argumentsDigest(input.arguments) !== found.arguments_digest) {
      throw errors.conflict('The arguments differ from those the approval is bound to (their digest does not match); nothing ran.');
    }
    const approve = input.decision === 'approve';
    const decided = await this.db.transaction().execute(async (trx) => {
      const approval = await repo.decideApproval(trx, found.id, approve ? 'approved' : 'denied', now);
      if (!approval) return null;
      const reply = await repo.resumeReply(trx, approval.message_id, this.lease.leaseMs, now);
      if (!reply) throw new Error(`the reply of pending approval ${approval.id} is not awaiting approval`);
      await this.audit?.record(
        actor,
        {
          action: APPROVAL_DECIDE_ACTION,
          resourceType: 'approval',
          resourceId: approval.id,
          outcome: 'success',
          metadata: {
            decision: input.decision,
            toolName: approval.tool_name,
            argumentsDigest: approval.arguments_digest,
            conversationId: approval.conversation_id,
            messageId: approval.message_id,
          },
        },
        trx,
      );
      return { approval, reply };
    });
    if (!decided) {
      // Decided or expired by a concurrent call between the read and the update.
      const again = await this.approval(userId, input.approvalId);
      if (again.status === 'expired' || again.status === 'pending') throw errors.approvalExpired();
      throw errors.conflict(`This approval was already decided (${again.status}); a decision is single use.`);
    }
    const { approval, reply } = decided;
    this.observer.approvalWait((now.getTime() - approval.created_at.getTime()) / 1000, input.decision);
    this.generating.add(reply.id);
    try {
      return { approval, reply: await this.continueTurn(userId, reply, approval, approve) };
    } finally {
      this.generating.delete(reply.id);
    }
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

  /** Continues a turn resumed by a decision, to its next stop; returns the reply as it then is. */
  private async continueTurn(
    userId: string,
    reply: repo.MessageRow,
    approval: repo.ApprovalRow,
    approve: boolean,
  ): Promise<repo.MessageRow> {
    const conversation = await repo.findConversation(this.db, userId, reply.conversation_id);
    const message = conversation ? await repo.userMessageBefore(this.db, conversation.id, reply.id) : undefined;
    if (!conversation || !message) return (await repo.findMessage(this.db, reply.id)) ?? reply;
    let model: ResolvedModel;
    try {
      model = await this.models.resolve(userId, reply.model, 'chat', { fallback: true });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return this.fail(userId, reply, reply.model ?? '', reply.content, {
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
      return this.fail(userId, reply, model.info.id, reply.content, { code: 'budget_exhausted', error });
    }
    // A grounded reply keeps its sources: the stored citations' snippets stand for the passages,
    // which are not stored, so the continued turn cites the same numbers.
    const cited = presentCitations(reply.citations);
    const grounding: Grounding | undefined =
      cited.length > 0
        ? { state: 'found', sources: cited.map((c) => ({ number: c.number, kind: c.sourceType, title: c.title, text: c.snippet })) }
        : undefined;
    const read = await this.turnContext(userId, conversation, message.content, message.id);
    const turn: Turn = {
      userId,
      model,
      reply,
      message,
      prompt: this.prompt(read, message.content, grounding),
      tools: read.tools,
      parts: reply.parts as unknown as MessagePart[],
      usage: { inputTokens: reply.input_tokens ?? 0, outputTokens: reply.output_tokens ?? 0 },
      cost: Number(reply.cost_micro_cents ?? 0),
      steps: reply.model_calls,
      hooks: { signal: new AbortController().signal },
      decisions: new Map([[approval.tool_call_id, { approve, arguments: approval.arguments as Record<string, unknown> }]]),
      next: null,
    };
    this.addUnavailable(turn, read.tools?.unavailable ?? []);
    return (await this.runTurn(turn)).reply;
  }

  /**
   * Ends the replies whose approval expired undecided: the approval `expired`, the reply `failed`
   * (`approval_expired`) with its `chat.failed`, in one transaction per batch. Resolves with how many.
   */
  async expireApprovals(now: Date = new Date()): Promise<number> {
    let ended = 0;
    for (;;) {
      const batch = await this.db.transaction().execute(async (trx) => {
        const replies = await repo.expireApprovals(trx, now, APPROVAL_EXPIRED, INTERRUPT_BATCH);
        for (const reply of replies) {
          await this.webhooks.emitEvent(trx, 'chat.failed', reply.owner_user_id, {
            conversationId: reply.conversation_id,
            messageId: reply.id,
            model: reply.model,
            errorCode: 'approval_expired',
            error: APPROVAL_EXPIRED,
          });
        }
        return replies.length;
      });
      ended += batch;
      if (batch < INTERRUPT_BATCH) return ended;
    }
  }

  /** Extends the leases of the replies this instance is generating. */
  async renewLeases(): Promise<void> {
    await repo.renewReplyLeases(this.db, [...this.generating], this.lease.leaseMs);
  }

  /**
   * Fails as `interrupted` the replies whose instance stopped (their lease ran out, on the
   * database's clock) and emits their `chat.failed`, each in the transaction that ends it, so one
   * instance only reports each. The replies this instance is generating are alive whatever their
   * lease says (one that lapsed while the database was unreachable is renewed again). Resolves
   * with how many this instance ended.
   */
  async recoverInterrupted(now: Date = new Date()): Promise<number> {
    let ended = 0;
    for (;;) {
      const batch = await this.db.transaction().execute((trx) => this.interrupt(trx, now, { alive: [...this.generating] }));
      ended += batch;
      if (batch < INTERRUPT_BATCH) return ended;
    }
  }

  /**
   * Fails as `interrupted` the replies this instance is still generating (a shutdown that cannot
   * wait for them), with their `chat.failed`. Resolves with how many it ended.
   */
  async interruptGenerating(): Promise<number> {
    // A turn whose model call began while its rows were being stored is among them once they are.
    await Promise.allSettled([...this.storing]);
    const ids = [...this.generating];
    if (ids.length === 0) return 0;
    return this.db.transaction().execute((trx) => this.interrupt(trx, new Date(), { ids }));
  }

  private async interrupt(trx: Transaction<DB>, now: Date, target: { ids: string[] } | { alive: string[] }): Promise<number> {
    const ended = await repo.interruptReplies(trx, now, INTERRUPTED, INTERRUPT_BATCH, target);
    for (const reply of ended) {
      await this.webhooks.emitEvent(trx, 'chat.failed', reply.owner_user_id, {
        conversationId: reply.conversation_id,
        messageId: reply.id,
        model: reply.model,
        errorCode: 'interrupted',
        error: INTERRUPTED,
      });
    }
    return ended.length;
  }

  /**
   * The knowledge sources a turn is grounded in, or null for an ungrounded turn: the message's
   * `knowledge`, else the caller's `knowledgeInChat`; memory items only while `memoryInChat` is on.
   */
  private async knowledgeSources(userId: string, asked: boolean | undefined): Promise<KnowledgeSources | null> {
    if (asked === false) return null;
    const settings = await this.settings.get(userId);
    if (!(asked ?? settings.knowledgeInChat)) return null;
    return settings.memoryInChat ? ['files', 'memory', 'notes', 'projects'] : ['files', 'notes', 'projects'];
  }

  /**
   * Grounds a turn: the caller's best knowledge results for the message (through the knowledge
   * service, as the caller, so only what they may read), cut to the sources' budget, and stored as
   * the reply's citations. A failed search never fails the turn: it goes on without sources, and
   * the prompt says so.
   */
  private async ground(userId: string, replyId: string, query: string, sources: KnowledgeSources): Promise<TurnGrounding> {
    let found: Awaited<ReturnType<KnowledgeService['passages']>>;
    try {
      found = await this.knowledge.passages(userId, query, { limit: GROUNDING_SOURCES, sources });
    } catch (error) {
      this.warn('knowledge retrieval failed; the chat turn goes on without sources', {
        messageId: replyId,
        error: (error as Error).message,
      });
      this.onGrounded('failed', 0);
      return { grounding: { state: 'failed' }, citations: [], retrieval: 'failed' };
    }
    const citations: StoredCitation[] = [];
    const given: Array<{ number: number; kind: string; title: string; text: string }> = [];
    let budget = GROUNDING_CHARS;
    for (const passage of found.passages) {
      if (budget < GROUNDING_MIN_CHARS) break;
      const text = cutText(passage.text, Math.min(GROUNDING_SOURCE_CHARS, budget));
      budget -= text.length;
      const number = citations.length + 1;
      given.push({ number, kind: passage.kind, title: passage.title, text });
      citations.push({
        number,
        sourceType: passage.kind,
        sourceId: passage.id,
        title: passage.title,
        snippet: passage.snippet,
        projectId: passage.projectId,
        fileId: passage.fileId,
        chunkIndex: passage.chunkIndex,
        startOffset: passage.startOffset,
        endOffset: passage.endOffset,
      });
    }
    this.onGrounded(citations.length > 0 ? 'grounded' : 'empty', citations.length);
    return {
      grounding: citations.length > 0 ? { state: 'found', sources: given } : { state: 'none' },
      citations,
      retrieval: found.retrieval,
    };
  }

  /**
   * What a turn's prompt is made of: the project, relevant memory, the history before `beforeId`,
   * the tools (the last two from `early`, when they are already being read).
   */
  private async turnContext(
    userId: string,
    conversation: repo.ConversationRow,
    text: string,
    beforeId: string,
    early: { history: Promise<TurnContext['history']>; tools: Promise<TurnContext['tools']> } = {
      history: repo.history(this.db, conversation.id, beforeId, HISTORY_MESSAGES),
      tools: this.turnTools(userId),
    },
  ): Promise<TurnContext> {
    const [project, memory, history, tools] = await Promise.all([
      conversation.project_id ? this.projects.get(userId, conversation.project_id).catch(() => null) : null,
      this.memory.relevant(userId, conversation.project_id, text, MEMORY_ITEMS),
      early.history,
      early.tools,
    ]);
    return { project, memory, history, tools };
  }

  /**
   * System prompt (project instructions, relevant memory, the tool sources the turn goes without, a
   * grounded turn's sources), recent history and the new message.
   */
  private prompt(context: TurnContext, text: string, grounding: Grounding | undefined): ChatMessage[] {
    const { project, memory, history, tools } = context;
    let system = SYSTEM_PROMPT;
    if (project)
      system += `\n\nThe conversation belongs to the project "${project.name}".${project.instructions ? `\nProject instructions:\n${project.instructions}` : ''}`;
    if (memory.length > 0) system += `\n\nWhat you know about the user:\n${memory.map((m) => `- ${m.content}`).join('\n')}`;
    const unavailable = tools?.unavailable ?? [];
    if (unavailable.length > 0) {
      const servers = unavailable.map((u) => `- the MCP server "${u.serverName}": ${u.reason}`).join('\n');
      system += `\n\nThese tool sources of the user are unavailable now; their tools are not offered. If the user asks for what they would do, say so.\n${servers}`;
    }
    if (grounding) system += `\n\n${groundingBlock(grounding)}`;
    return [
      { role: 'system', content: system },
      ...history.map((m) => ({ role: m.role as 'user' | 'assistant', content: m.content })),
      { role: 'user', content: text },
    ];
  }

  /** Ends the turn's reply as complete: its totals stored, its last step charged, `chat.completed`. */
  private complete(turn: Turn, step: { index: number; usage: ChatUsage }) {
    const { userId, reply, model } = turn;
    const text = contentOf(turn.parts);
    return this.turnWrite(async (trx) => {
      const now = new Date();
      const stored = await repo.endReply(trx, reply.id, { ...this.progress(turn), status: 'complete', updated_at: now });
      // Already failed as interrupted (this instance outlived its lease), or the conversation was deleted meanwhile.
      if (!stored) return (await repo.findMessage(trx, reply.id)) ?? { ...reply, content: text, status: 'complete' };
      await this.billing.charge(trx, {
        userId,
        kind: 'chat.reply',
        resourceId: this.stepResource(turn, step.index),
        model: model.info,
        connectionId: model.connectionId,
        usage: step.usage,
        at: now,
      });
      await this.webhooks.emitEvent(trx, 'chat.completed', userId, {
        conversationId: reply.conversation_id,
        messageId: reply.id,
        model: model.info.id,
        content: text,
        usage: presentUsage(turn.usage, turn.cost),
        citations: presentCitations(stored.citations),
      });
      return stored;
    });
  }

  private fail(userId: string, reply: repo.MessageRow, model: string, text: string, failure: { code: FailureCode; error: string }) {
    return this.turnWrite(async (trx) => {
      const stored = await repo.endReply(trx, reply.id, {
        content: text,
        status: 'failed',
        error_code: failure.code,
        error_message: failure.error,
        updated_at: new Date(),
      });
      if (!stored)
        return (
          (await repo.findMessage(trx, reply.id)) ?? {
            ...reply,
            content: text,
            status: 'failed',
            error_code: failure.code,
            error_message: failure.error,
          }
        );
      await this.webhooks.emitEvent(trx, 'chat.failed', userId, {
        conversationId: reply.conversation_id,
        messageId: reply.id,
        model,
        errorCode: failure.code,
        error: failure.error,
      });
      return stored;
    });
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const toSpec = (d: ToolDefinition): ToolSpec => ({ name: d.name, description: d.description, inputSchema: d.inputSchema });

/** The MCP server a tool comes from, or null for a built-in one. */
const serverOf = (d: ToolDefinition): string | null => (d.source.type === 'mcp' ? d.source.serverId : null);

/** The sources a reply says the turn went without, by server id. */
function unavailableIn(parts: MessagePart[]): Map<string, UnavailableSource> {
  const named = new Map<string, UnavailableSource>();
  for (const part of parts) if (part.type === 'tool-source-unavailable') named.set(part.serverId, part);
  return named;
}

/** A reply's text: its text parts, concatenated. */
const contentOf = (parts: MessagePart[]) => parts.map((p) => (p.type === 'text' ? p.text : '')).join('');

/** The model's view of a turn so far: each step's text and tool calls, then their results. */
function promptOfParts(parts: MessagePart[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  let assistant: Extract<ChatMessage, { role: 'assistant' }> | null = null;
  for (const part of parts) {
    // What the turn went without is told in the system prompt and in the failed call's result.
    if (part.type === 'tool-source-unavailable') continue;
    if (part.type === 'tool-result') {
      assistant = null;
      messages.push({ role: 'tool', toolCallId: part.toolCallId, toolName: part.toolName, content: part.output, isError: part.isError });
      continue;
    }
    if (!assistant) {
      assistant = { role: 'assistant', content: '', toolCalls: [] };
      messages.push(assistant);
    }
    if (part.type === 'text') assistant.content += part.text;
    else if (part.type === 'tool-call')
      assistant.toolCalls?.push({ toolCallId: part.toolCallId, toolName: part.toolName, arguments: part.arguments });
  }
  return messages;
}
