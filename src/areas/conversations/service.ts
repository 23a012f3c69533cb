import type { Transaction } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import { ApiError, errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import { type ChatMessage, type ChatUsage, ModelProviderFailure } from '../../platform/ai/models';
import { type Database, type DB, PgError, pgErrorCode } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import { type Grounding, groundingBlock } from '../../platform/ai/grounding';
import type { KnowledgeService } from '../knowledge/service';
import type { MemoryService } from '../memory/service';
import type { SettingsService } from '../settings/service';
import type { ModelService, ResolvedModel } from '../models/service';
import type { ProjectService } from '../projects/service';
import type { SkillService } from '../skills/service';
import type { BudgetGate } from '../billing/service';
import { costMicroCents, presentUsage } from '../../platform/usage';
import type { WebhookService } from '../webhooks/service';
import { presentCitations, type StoredCitation } from './presenter';
import * as repo from './repository';

type CreateInput = RequestInput<'ConversationCreateRequest'>;
type UpdateInput = RequestInput<'ConversationUpdateRequest'>;
type SendInput = RequestInput<'MessageCreateRequest'>;
/** The knowledge sources a grounded turn searches. */
type KnowledgeSources = Array<'files' | 'memory' | 'notes' | 'projects'>;

export type FailureCode = 'model_provider_error' | 'model_provider_timeout' | 'cancelled';

/** How a reply's instance holds it while generating it (see `ChatService.recoverInterrupted`). */
export interface ReplyLeaseSettings {
  /** How long a reply's lease lasts; renewed at a third of it while the reply is generated. */
  leaseMs: number;
}

export interface SendOutcome {
  message: repo.MessageRow;
  reply: repo.MessageRow;
  failure: { code: FailureCode; error: string } | null;
}

export interface SendHooks {
  /** The client went away: cancels the reply. */
  signal: AbortSignal;
  /** The user message is stored and the reply begins. */
  onStart?: (message: repo.MessageRow) => void;
  /** Set to receive the reply as it is written (streamed from the provider). */
  onDelta?: (text: string) => void;
  /** A grounded turn's sources, before the reply is written (`failed`: the knowledge could not be searched). */
  onCitations?: (citations: StoredCitation[], retrieval: 'hybrid' | 'lexical' | 'failed') => void;
}

/** How a grounded turn went, for the metrics: sources given, none matched, or the search failed. */
export type GroundingOutcome = 'grounded' | 'empty' | 'failed';

/** A grounded turn's sources: what the prompt gives the model and what the reply cites. */
interface TurnGrounding {
  grounding: Grounding;
  citations: StoredCitation[];
  retrieval: 'hybrid' | 'lexical' | 'failed';
}

const HISTORY_MESSAGES = 20;
const MEMORY_ITEMS = 5;
const TITLE_LENGTH = 60;
const SYSTEM_PROMPT = 'You are the assistant of an AI workspace. Answer in Markdown.';
const INTERRUPTED = 'The instance writing the reply stopped before it ended.';
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
  models: Pick<ModelService, 'resolve' | 'check'>;
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
}

/**
 * Conversations and chat: a user message, the model's reply (whole or streamed) through the
 * provider interface, its usage in the usage ledger, and `chat.completed` / `chat.failed` in the
 * webhook outbox, written in the same transaction as the reply's final state.
 */
export class ChatService {
  private readonly db: Database;
  private readonly models: Pick<ModelService, 'resolve' | 'check'>;
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

  constructor({ db, models, projects, skills, webhooks, timeoutMs, billing, lease, memory, knowledge, settings, warn, onGrounded }: ChatServiceDeps) {
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

  /** The replies this instance is generating: their leases are renewed while they are. */
  private readonly generating = new Set<string>();

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
      if (error instanceof ApiError && error.status === 404) throw errors.referenceNotFound('agentId', 'Agent not found: agentId must be one of your skills.');
      throw error;
    });
    const existing = await repo.findGreeting(this.db, conversation.id, skill.id);
    if (existing) return existing;
    const now = new Date();
    const content = skill.greeting.trim() !== '' ? skill.greeting : `Hi, I'm ${skill.name}.${skill.description ? ` ${skill.description}` : ''}`;
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
    const conversation = await this.get(userId, input.conversationId);
    if (conversation.archived) throw errors.conflict('The conversation is archived; unarchive it to continue.');
    // The message's model; else the conversation's, or the default when it has none or it is gone
    // (a blocked one is refused).
    const model = await this.models.resolve(userId, input.model ?? conversation.model, 'chat', { fallback: input.model === undefined });
    // Usage on the user's own key is not charged to the deployment's budget.
    if (model.connectionId === null) await this.billing.requireBudget(userId);
    const knowledge = await this.knowledgeSources(userId, input.knowledge);
    const now = new Date();
    const [message, reply] = await this.db.transaction().execute(async (trx) => {
      const base = { conversation_id: conversation.id, owner_user_id: userId, created_at: now, updated_at: now };
      const stored = await repo.insertMessage(trx, { ...base, id: uuidv7(now.getTime()), role: 'user', kind: 'message', content: input.content, status: 'complete' });
      const pending = await repo.insertMessage(trx, {
        ...base,
        id: uuidv7(now.getTime()),
        role: 'assistant',
        kind: 'reply',
        status: 'generating',
        model: model.info.id,
        locked_until: new Date(now.getTime() + this.lease.leaseMs),
      });
      await repo.updateConversation(trx, userId, conversation.id, {
        updated_at: now,
        ...(conversation.title === '' ? { title: titleFrom(input.content) } : {}),
      });
      return [stored, pending] as const;
    });
    this.generating.add(reply.id);
    try {
      return await this.generate(userId, conversation, model, message, reply, hooks, knowledge);
    } finally {
      // A reply left generating here (an unexpected error) is failed by a sweep once its lease ends.
      this.generating.delete(reply.id);
    }
  }

  private async generate(
    userId: string,
    conversation: repo.ConversationRow,
    model: ResolvedModel,
    message: repo.MessageRow,
    reply: repo.MessageRow,
    hooks: SendHooks,
    knowledge: KnowledgeSources | null,
  ): Promise<SendOutcome> {
    hooks.onStart?.(message);
    const grounding = knowledge ? await this.ground(userId, reply, message.content, knowledge) : null;
    if (grounding) hooks.onCitations?.(grounding.citations, grounding.retrieval);
    const prompt = await this.prompt(userId, conversation, message, grounding?.grounding);
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = AbortSignal.any([hooks.signal, timeout]);
    let text = '';
    try {
      let usage: ChatUsage = { inputTokens: 0, outputTokens: 0 };
      if (hooks.onDelta) {
        for await (const part of model.caller.stream({ model: model.providerModelId, messages: prompt, signal })) {
          if (part.type === 'delta') {
            text += part.text;
            hooks.onDelta(part.text);
          } else usage = part.usage;
        }
      } else {
        ({ text, usage } = await model.caller.generate({ model: model.providerModelId, messages: prompt, signal }));
      }
      return { message, reply: await this.complete(userId, reply, model, text, usage), failure: null };
    } catch (error) {
      const failure = timeout.aborted
        ? { code: 'model_provider_timeout' as const, error: `no answer within ${this.timeoutMs} ms` }
        : hooks.signal.aborted
          ? { code: 'cancelled' as const, error: 'the client closed the connection' }
          : error instanceof ModelProviderFailure
            ? { code: 'model_provider_error' as const, error: error.message }
            : null;
      if (!failure) throw error;
      return { message, reply: await this.fail(userId, reply, model.info.id, text, failure), failure };
    }
  }

  /** Extends the leases of the replies this instance is generating. */
  async renewLeases(now: Date = new Date()): Promise<void> {
    await repo.renewReplyLeases(this.db, [...this.generating], new Date(now.getTime() + this.lease.leaseMs));
  }

  /**
   * Fails as `interrupted` the replies whose instance stopped (their lease ran out before `now`)
   * and emits their `chat.failed`, each in the transaction that ends it, so one instance only
   * reports each. Resolves with how many this instance ended.
   */
  async recoverInterrupted(now: Date = new Date()): Promise<number> {
    let ended = 0;
    for (;;) {
      const batch = await this.db.transaction().execute((trx) => this.interrupt(trx, now));
      ended += batch;
      if (batch < INTERRUPT_BATCH) return ended;
    }
  }

  /**
   * Fails as `interrupted` the replies this instance is still generating (a shutdown that cannot
   * wait for them), with their `chat.failed`. Resolves with how many it ended.
   */
  async interruptGenerating(): Promise<number> {
    const ids = [...this.generating];
    if (ids.length === 0) return 0;
    return this.db.transaction().execute((trx) => this.interrupt(trx, new Date(), ids));
  }

  private async interrupt(trx: Transaction<DB>, now: Date, ids?: string[]): Promise<number> {
    const ended = await repo.interruptReplies(trx, now, INTERRUPTED, INTERRUPT_BATCH, ids);
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
  private async ground(userId: string, reply: repo.MessageRow, query: string, sources: KnowledgeSources): Promise<TurnGrounding> {
    let found: Awaited<ReturnType<KnowledgeService['passages']>>;
    try {
      found = await this.knowledge.passages(userId, query, { limit: GROUNDING_SOURCES, sources });
    } catch (error) {
      this.warn('knowledge retrieval failed; the chat turn goes on without sources', { messageId: reply.id, error: (error as Error).message });
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
    if (citations.length > 0) await repo.setReplyCitations(this.db, reply.id, JSON.stringify(citations));
    this.onGrounded(citations.length > 0 ? 'grounded' : 'empty', citations.length);
    return { grounding: citations.length > 0 ? { state: 'found', sources: given } : { state: 'none' }, citations, retrieval: found.retrieval };
  }

  /** System prompt (project instructions, relevant memory, a grounded turn's sources), recent history and the new message. */
  private async prompt(userId: string, conversation: repo.ConversationRow, message: repo.MessageRow, grounding?: Grounding): Promise<ChatMessage[]> {
    const project = conversation.project_id ? await this.projects.get(userId, conversation.project_id).catch(() => null) : null;
    const [memory, history] = await Promise.all([
      this.memory.relevant(userId, conversation.project_id, message.content, MEMORY_ITEMS),
      repo.history(this.db, conversation.id, message.id, HISTORY_MESSAGES),
    ]);
    let system = SYSTEM_PROMPT;
    if (project) system += `\n\nThe conversation belongs to the project "${project.name}".${project.instructions ? `\nProject instructions:\n${project.instructions}` : ''}`;
    if (memory.length > 0) system += `\n\nWhat you know about the user:\n${memory.map((m) => `- ${m.content}`).join('\n')}`;
    if (grounding) system += `\n\n${groundingBlock(grounding)}`;
    return [
      { role: 'system', content: system },
      ...history.map((m) => ({ role: m.role as 'user' | 'assistant', content: m.content })),
      { role: 'user', content: message.content },
    ];
  }

  private complete(userId: string, reply: repo.MessageRow, model: ResolvedModel, text: string, usage: ChatUsage) {
    return this.db.transaction().execute(async (trx) => {
      const now = new Date();
      const cost = model.connectionId === null ? costMicroCents(model.info, usage) : 0;
      const stored = await repo.endReply(trx, reply.id, {
        content: text,
        status: 'complete',
        input_tokens: usage.inputTokens,
        output_tokens: usage.outputTokens,
        cost_micro_cents: cost,
        updated_at: now,
      });
      // Already failed as interrupted (this instance outlived its lease), or the conversation was deleted meanwhile.
      if (!stored) return (await repo.findMessage(trx, reply.id)) ?? { ...reply, content: text, status: 'complete' };
      await this.billing.charge(trx, { userId, kind: 'chat.reply', resourceId: reply.id, model: model.info, connectionId: model.connectionId, usage, at: now });
      await this.webhooks.emitEvent(trx, 'chat.completed', userId, {
        conversationId: reply.conversation_id,
        messageId: reply.id,
        model: model.info.id,
        content: text,
        usage: presentUsage(usage, cost),
        citations: presentCitations(stored.citations),
      });
      return stored;
    });
  }

  private fail(userId: string, reply: repo.MessageRow, model: string, text: string, failure: { code: FailureCode; error: string }) {
    return this.db.transaction().execute(async (trx) => {
      const stored = await repo.endReply(trx, reply.id, {
        content: text,
        status: 'failed',
        error_code: failure.code,
        error_message: failure.error,
        updated_at: new Date(),
      });
      if (!stored) return (await repo.findMessage(trx, reply.id)) ?? { ...reply, content: text, status: 'failed', error_code: failure.code, error_message: failure.error };
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
