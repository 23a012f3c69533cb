import { ApiError, errors } from '../../platform/errors';
import type { RequestInput } from '../../platform/api-types';
import { type Database, PgError, pgErrorCode } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import { promptTokenBound, RESERVED_OUTPUT_TOKENS } from '../../platform/usage';
import type { BudgetGate, Hold } from '../billing/service';
import type { ModelService, ResolvedModel } from '../models/service';
import type { AppliedSkill, SkillService } from '../skills/service';
import { narrowTools, type TurnTools } from '../tools/service';
import { type Attachments, userContent, withDocuments } from './attachments';
import { type Grounder, groundingOfCitations } from './grounding';
import type { ReplyLeases } from './leases';
import { buildPrompt, type TurnContexts } from './prompt';
import type { ReplyWrites } from './reply-writes';
import * as repo from './repository';
import type { ConversationService } from './service';
import type { TurnSteps } from './steps';
import { type ConversationTitler, titleFrom } from './titles';
import { skillAsked } from './skill-turn';
import { addUnavailable, type MessagePart, type SendHooks, type SendOutcome, type Turn } from './turn';

type SendInput = RequestInput<'MessageCreateRequest'>;
type RegenerateInput = RequestInput<'MessageRegenerateRequest'>;

/** The user message a turn answers: a new one, or a stored one that a regenerated reply answers again. */
type Asked =
  | { stored: null; content: string; attachments: SendInput['attachments']; parentId: string | null | undefined }
  | { stored: repo.MessageRow };

/** A turn to run: its conversation, its user message, and how the reply is written. */
interface TurnRequest {
  conversationId: string;
  asked: Asked;
  /** The model asked for; else `earlierModel`, the conversation's, or the default. */
  model: string | undefined;
  /** A regenerated reply's model, used when no other is asked for. */
  earlierModel: string | null;
  knowledge: boolean | undefined;
  /** The skill the turn applies (and the request field naming it), or null. */
  skill: { id: string; field: string } | null;
}

export interface TurnEngineDeps {
  db: Database;
  models: Pick<ModelService, 'resolve' | 'resolver'>;
  conversations: Pick<ConversationService, 'get' | 'message'>;
  /** The skills turns apply (own, or granted `use`). */
  skills: Pick<SkillService, 'forChat'>;
  billing: Pick<BudgetGate, 'requireBudget' | 'reserve' | 'release'>;
  contexts: TurnContexts;
  grounder: Grounder;
  attachments: Attachments;
  writes: ReplyWrites;
  leases: ReplyLeases;
  steps: TurnSteps;
  /** Names a conversation with its model after the first exchange. */
  titles: Pick<ConversationTitler, 'afterReply' | 'afterResumed'>;
}

/**
 * Chat turns: a user message and the model's reply (whole or streamed) through the provider
 * interface, on the branch of the conversation's tree the message follows; replies written again
 * for a stored message; and the turns continued after a decision. Their steps are `TurnSteps`'.
 */
export class TurnEngine {
  private readonly db: Database;
  private readonly models: Pick<ModelService, 'resolve' | 'resolver'>;
  private readonly conversations: Pick<ConversationService, 'get' | 'message'>;
  private readonly skills: Pick<SkillService, 'forChat'>;
  private readonly billing: Pick<BudgetGate, 'requireBudget' | 'reserve' | 'release'>;
  private readonly contexts: TurnContexts;
  private readonly grounder: Grounder;
  private readonly attachments: Attachments;
  private readonly writes: ReplyWrites;
  private readonly leases: ReplyLeases;
  private readonly steps: TurnSteps;
  private readonly titles: Pick<ConversationTitler, 'afterReply' | 'afterResumed'>;

  constructor(deps: TurnEngineDeps) {
    this.db = deps.db;
    this.models = deps.models;
    this.conversations = deps.conversations;
    this.skills = deps.skills;
    this.billing = deps.billing;
    this.contexts = deps.contexts;
    this.grounder = deps.grounder;
    this.attachments = deps.attachments;
    this.writes = deps.writes;
    this.leases = deps.leases;
    this.steps = deps.steps;
    this.titles = deps.titles;
  }

  /**
   * Stores the user's message (after `parentId`, else the conversation's current leaf) and a reply
   * being generated, asks the model, and stores the reply's outcome. A provider failure, timeout or
   * cancellation is an outcome (`failure`), not an error.
   */
  send(userId: string, input: SendInput, hooks: SendHooks): Promise<SendOutcome> {
    const asked: Asked = { stored: null, content: input.content, attachments: input.attachments, parentId: input.parentId };
    const { skill, model } = skillAsked(input);
    return this.run(
      userId,
      { conversationId: input.conversationId, asked, model, earlierModel: null, knowledge: input.knowledge, skill },
      hooks,
    );
  }

  /**
   * Writes another reply to a user message (named, or answered by the reply named): a sibling of
   * the replies it has, which becomes the conversation's current leaf.
   */
  async regenerate(userId: string, input: RegenerateInput, hooks: SendHooks): Promise<SendOutcome> {
    const target = await this.conversations.message(userId, input.messageId);
    let message = target;
    if (target.role !== 'user') {
      const parent = target.kind === 'reply' && target.parent_id ? await repo.findMessage(this.db, target.parent_id) : undefined;
      if (!parent || parent.role !== 'user')
        throw errors.invalidRequest('Only a reply to a user message can be written again.', [
          { path: '/body/messageId', message: `names a ${target.kind} that answers no user message` },
        ]);
      message = parent;
    }
    const named = skillAsked({ model: input.model });
    const request = { conversationId: message.conversation_id, asked: { stored: message }, model: named.model, knowledge: input.knowledge };
    // A reply written again keeps the skill of the reply it replaces, unless `model` names one.
    const skill = named.skill ?? (target !== message && target.agent_id ? { id: target.agent_id, field: 'messageId' } : null);
    return this.run(userId, { ...request, earlierModel: target === message ? null : target.model, skill }, hooks);
  }

  private async run(
    userId: string,
    { conversationId, asked, model: asking, earlierModel, knowledge: grounded, skill: skillNamed }: TurnRequest,
    hooks: SendHooks,
  ) {
    const now = new Date();
    const messageId = asked.stored?.id ?? uuidv7(now.getTime());
    const replyId = uuidv7(now.getTime());
    const content = asked.stored ? asked.stored.content : asked.content;
    // The time to the first token is the sum of the turn's round trips before the model call, so
    // each read starts as soon as what it depends on is known: the history, the caller's tools,
    // settings, models and budget with the conversation (none is used unless the conversation is
    // the caller's); its project and the relevant memory once it is read. A read's failure
    // surfaces where it is awaited.
    const early = this.contexts.startReads(userId, conversationId, asked.stored ? asked.stored.parent_id : asked.parentId);
    early.history.catch(() => undefined);
    early.tools.catch(() => undefined);
    // The budget applies only to the deployment's models (usage on the user's own key is not
    // charged to it), so its answer is used once the model is known.
    const budget = this.billing.requireBudget(userId).then(
      () => null,
      (error: unknown) => error,
    );
    const knowledgeRead = this.grounder.sources(userId, grounded);
    knowledgeRead.catch(() => undefined);
    const resolveModel = this.models.resolver(userId);
    let skillRead = skillNamed ? this.skills.forChat(userId, skillNamed.id, skillNamed.field) : Promise.resolve(null);
    skillRead.catch(() => undefined);
    const conversation = await this.conversations.get(userId, conversationId);
    // A conversation whose model is a skill (`skill:<skillId>`) chats with it unless the turn names a skill or model.
    const conversationSkill = skillAsked({ model: conversation.model ?? undefined }).skill;
    if (conversationSkill && !skillNamed && asking === undefined && earlierModel === null)
      skillRead = this.skills.forChat(userId, conversationSkill.id, 'model');
    skillRead.catch(() => undefined);
    const conversationModel = conversationSkill ? null : conversation.model;
    if (conversation.archived) throw errors.conflict('The conversation is archived; unarchive it to continue.');
    // The message the new one follows: the one named, or the branch the conversation shows.
    const parentId = asked.stored ? asked.stored.parent_id : asked.parentId === undefined ? conversation.current_leaf_id : asked.parentId;
    if (!asked.stored && asked.parentId && (await early.history).startId !== asked.parentId)
      throw errors.referenceNotFound('parentId', 'Message not found: parentId must be a message of the conversation.');
    const context = this.contexts.read(userId, conversation, content, early, parentId);
    context.catch(() => undefined);
    // The message's model; else the skill's, the regenerated reply's, the conversation's, or the
    // default when it has none or it is gone (a blocked one is refused, as is a skill's that is
    // blocked or gone).
    const skill = await skillRead;
    const skillModel = asking === undefined ? (skill?.model ?? null) : null;
    const [model, knowledge] = await Promise.all([
      resolveModel(asking ?? skillModel ?? earlierModel ?? conversationModel, 'chat', {
        fallback: asking === undefined && skillModel === null,
        ...(skillModel !== null && skillNamed ? { field: `/body/${skillNamed.field}` } : {}),
      }),
      knowledgeRead,
    ]);
    if (model.connectionId === null) {
      const refused = await budget;
      if (refused) throw refused;
    }
    // Checked (and read) before anything is stored: a refused attachment leaves no message.
    const requested = asked.stored ? (asked.stored.attachments as Array<{ fileId: string }>) : asked.attachments;
    const attached = await this.attachments.prepare(userId, requested, model);
    // The first model call's bound is held against the caller's quotas before anything is stored
    // (`402 quota_exceeded` leaves nothing); the prompt's known text (history and message) bounds its input.
    const history = model.connectionId === null ? (await early.history).messages : [];
    const hold =
      model.connectionId === null
        ? await this.billing.reserve(userId, {
            model: model.info,
            usage: { inputTokens: promptTokenBound([history, content, attached?.documents ?? []]), outputTokens: RESERVED_OUTPUT_TOKENS },
          })
        : null;
    // The turn's hold as its steps replace it, released when the turn ends without charging it.
    let holding: { hold: Hold | null } = { hold };
    const base = { conversation_id: conversation.id, owner_user_id: userId, created_at: now, updated_at: now };
    const named = !asked.stored && conversation.title === '';
    const touched = {
      ownerUserId: userId,
      id: conversation.id,
      changes: { updated_at: now, current_leaf_id: replyId, ...(named ? { title: titleFrom(content) } : {}) },
    };
    const pending = {
      ...base,
      id: replyId,
      parent_id: messageId,
      role: 'assistant',
      kind: 'reply',
      status: 'generating',
      model: model.info.id,
      // The skill answering (the message presents it as `skillId`).
      agent_id: skill?.id ?? null,
    };
    // The turn is stored while its sources are searched and the model is asked: the model's
    // first token never waits for the write, and nothing is streamed before it is committed. The
    // reply counts as this instance's from the start (see `ReplyLeases.interruptGenerating`).
    const stop = this.leases.hold(replyId);
    try {
      const stored = (
        asked.stored
          ? repo.insertReply(this.db, touched, asked.stored, pending, this.leases.leaseMs)
          : repo.insertTurn(
              this.db,
              touched,
              {
                ...base,
                id: messageId,
                parent_id: parentId,
                role: 'user',
                kind: 'message',
                content,
                status: 'complete',
                attachments: JSON.stringify(attached?.stored ?? []),
              },
              pending,
              this.leases.leaseMs,
            )
      ).catch((error: unknown) => {
        // The message it follows was deleted meanwhile.
        if (pgErrorCode(error) === PgError.foreignKeyViolation) {
          if (asked.stored) throw errors.referenceNotFound('messageId', 'Message not found: it was deleted.');
          if (asked.parentId) throw errors.referenceNotFound('parentId', 'Message not found: it was deleted.');
          throw errors.conflict('The branch the message was to follow was deleted meanwhile; send it again.');
        }
        throw error;
      });
      const started = stored.then(([message, reply]) => hooks.onStart?.(message, reply));
      this.leases.storingTurn(started);
      const [read, grounding] = await Promise.all([
        context,
        knowledge ? this.grounder.ground(userId, replyId, content, knowledge, skill?.knowledgeScope ?? null) : null,
      ]);
      // Attached documents are numbered sources before the knowledge a grounded turn found.
      const sources = withDocuments(grounding, attached?.documents ?? []);
      const turn: Omit<Turn, 'message' | 'reply'> = {
        userId,
        model,
        prompt: buildPrompt(read, userContent(content, attached?.images), sources.grounding, skill),
        tools: skillTools(read.tools, skill),
        parts: [],
        usage: { inputTokens: 0, outputTokens: 0 },
        cost: 0,
        steps: 0,
        // A stop (asked for on any instance) aborts the model call as a closed stream does.
        hooks: { ...hooks, signal: AbortSignal.any([hooks.signal, stop]) },
        stop,
        decisions: new Map(),
        next: null,
        hold,
      };
      const first = this.steps.start(turn);
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
      holding = stepping;
      addUnavailable(stepping, read.tools?.unavailable ?? []);
      const outcome = await this.steps.run(stepping);
      // The first exchange of an untitled conversation: its model-written title follows in the background.
      if (named && !conversation.temporary) this.titles.afterReply(outcome.reply, content);
      return outcome;
    } finally {
      // A reply left generating here (an unexpected error) is failed by a sweep once its lease ends.
      this.leases.release(replyId);
      await this.billing.release(holding.hold);
    }
  }

  /**
   * Continues a turn resumed by a decision on its approval (the reply generating again, held by
   * the caller's lease), to its next stop; returns the reply as it then is.
   */
  async resume(userId: string, reply: repo.MessageRow, approval: repo.ApprovalRow, approve: boolean): Promise<repo.MessageRow> {
    const conversation = await repo.findConversation(this.db, userId, reply.conversation_id);
    const message = conversation && reply.parent_id ? await repo.findMessage(this.db, reply.parent_id) : undefined;
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
    // A skill's reply goes on with the skill as it is now, while the caller may still use it.
    let skill: AppliedSkill | null = null;
    if (reply.agent_id) {
      try {
        skill = await this.skills.forChat(userId, reply.agent_id, 'skillId');
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        return this.writes.fail(userId, reply, model.info.id, reply.content, {
          code: 'model_provider_error',
          error: `The reply's skill cannot be used: ${error.message}`,
        });
      }
    }
    // A grounded reply keeps its sources (its stored citations).
    const grounding = groundingOfCitations(reply.citations);
    const [read, images] = await Promise.all([
      this.contexts.read(
        userId,
        conversation,
        message.content,
        this.contexts.startReads(userId, conversation.id, message.parent_id),
        message.parent_id,
      ),
      this.attachments.imagesOf(userId, message.attachments, model),
    ]);
    const turn: Turn = {
      userId,
      model,
      reply,
      message,
      prompt: buildPrompt(read, userContent(message.content, images), grounding, skill),
      tools: skillTools(read.tools, skill),
      parts: reply.parts as unknown as MessagePart[],
      usage: { inputTokens: reply.input_tokens ?? 0, outputTokens: reply.output_tokens ?? 0 },
      cost: Number(reply.cost_micro_cents ?? 0),
      steps: reply.model_calls,
      hooks: { signal: this.leases.stopSignal(reply.id) },
      stop: this.leases.stopSignal(reply.id),
      decisions: new Map([[approval.tool_call_id, { approve, arguments: approval.arguments as Record<string, unknown> }]]),
      next: null,
      hold: null,
    };
    addUnavailable(turn, read.tools?.unavailable ?? []);
    let ended: repo.MessageRow;
    try {
      ended = (await this.steps.run(turn)).reply;
    } finally {
      await this.billing.release(turn.hold);
    }
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
}

/** A turn's tools with a skill: only the skill's, under its policies, searching its knowledge scope (see narrowTools). */
function skillTools(tools: TurnTools | null, skill: AppliedSkill | null): TurnTools | null {
  return tools && skill ? narrowTools(tools, skill.tools, skill.knowledgeScope) : tools;
}
