import { ApiError } from '../../platform/errors';
import type { Database } from '../../platform/db';
import { TITLE_INSTRUCTION } from '../../platform/ai/titles';
import type { ChatMessage, ModelInfo } from '../../platform/ai/models';
import { promptTokenBound } from '../../platform/usage';
import type { BudgetGate, Hold } from '../billing/service';

import type { ModelService } from '../models/service';
import type { SettingsService } from '../settings/service';
import * as repo from './repository';

/** The most a title's call under a quota may write: a title is a few words. */
const TITLE_OUTPUT_TOKENS = 64;

/** The title a first message gives an untitled conversation at once: the message cut to 60 characters. */
const CUT_LENGTH = 60;
export function titleFrom(content: string): string {
  const line = content.trim().replace(/\s+/g, ' ');
  return line.length <= CUT_LENGTH ? line : `${line.slice(0, CUT_LENGTH - 1)}…`;
}

/** The longest title (the document's `ConversationTitle`). */
const MAX_TITLE = 200;
/** How much of the first message and of the reply the title request carries. */
const EXCERPT = 2000;

/**
 * The title in a model's answer: its first line that is not empty, without quotes, emphasis or a
 * `Title:` label around it, white space collapsed, at most 200 characters; null when none is left.
 */
export function titleOfAnswer(text: string): string | null {
  const line = text
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '');
  if (!line) return null;
  const title = line
    .replace(/^#+\s*/, '')
    .replace(/^title\s*:\s*/i, '')
    .replace(/^["'“”‘’*_`]+|["'“”‘’*_`]+$/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  if (title === '') return null;
  return title.length <= MAX_TITLE ? title : `${title.slice(0, MAX_TITLE - 1)}…`;
}

export interface TitlerDeps {
  db: Database;
  models: Pick<ModelService, 'resolve'>;
  settings: Pick<SettingsService, 'get'>;
  billing: Pick<BudgetGate, 'requireBudget' | 'charge' | 'reserve' | 'release'>;
  /** How long the title's model call may take (the chat timeout). */
  timeoutMs: number;
  warn: (message: string, meta: Record<string, unknown>) => void;
}

/** The first exchange of a conversation, whose title the turn cut from its message. */
export interface FirstExchange {
  userId: string;
  conversationId: string;
  replyId: string;
  message: string;
  reply: string;
}

/**
 * Model-written titles: after a conversation's first exchange (not of a temporary one, which no
 * list shows), in the background, the caller's default chat model (unless their `autoTitles`
 * setting is off) is asked for a short title, which replaces the one cut from the first message
 * unless the user renamed the conversation meanwhile. The call is charged like a reply (kind
 * `chat.title`, resource `<replyId>:title`; the budget applies to the deployment's models only).
 * Any failure keeps the cut title and is only logged.
 */
export class ConversationTitler {
  private readonly deps: TitlerDeps;
  private readonly running = new Set<Promise<void>>();
  /** Aborts the calls in flight at shutdown. */
  private readonly stopping = new AbortController();

  constructor(deps: TitlerDeps) {
    this.deps = deps;
  }

  /** After the first exchange of an untitled conversation (`message` and its `reply`): names it if the reply is complete. */
  afterReply(reply: repo.MessageRow, message: string): void {
    if (reply.status !== 'complete') return;
    const exchange = { conversationId: reply.conversation_id, replyId: reply.id, message, reply: reply.content };
    this.schedule({ userId: reply.owner_user_id, ...exchange });
  }

  /**
   * After a turn resumed by an approval decision: a first exchange (no earlier user message) whose
   * conversation still has the title cut from its message is named as `afterReply` does.
   */
  afterResumed(conversation: repo.ConversationRow, message: repo.MessageRow, reply: repo.MessageRow): void {
    if (reply.status !== 'complete' || conversation.temporary || conversation.title !== titleFrom(message.content)) return;
    const earlier = repo.userMessageBefore(this.deps.db, conversation.id, message.id);
    const task: Promise<void> = earlier
      .then((before) => (before ? undefined : this.afterReply(reply, message.content)))
      .catch(() => undefined)
      .finally(() => this.running.delete(task));
    this.running.add(task);
  }

  /** Starts naming the conversation of `exchange`; returns at once (the reply never waits for its title). */
  private schedule(exchange: FirstExchange): void {
    if (this.stopping.signal.aborted) return;
    const task: Promise<void> = this.write(exchange)
      .catch((error: unknown) => {
        if (!this.stopping.signal.aborted)
          this.deps.warn('the conversation keeps its cut title: the title could not be written', {
            conversationId: exchange.conversationId,
            error: (error as Error).message,
          });
      })
      .finally(() => this.running.delete(task));
    this.running.add(task);
  }

  /** Resolves when no title is being written (those started meanwhile included). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  /** Aborts the title calls in flight and waits for them to end (at shutdown, before the database closes). */
  async settle(): Promise<void> {
    this.stopping.abort(new Error('the service is stopping'));
    await this.idle();
  }

  private async write({ userId, conversationId, replyId, message, reply }: FirstExchange): Promise<void> {
    const { db, models, settings, billing, timeoutMs } = this.deps;
    if (!(await settings.get(userId)).autoTitles) return;
    const model = await models.resolve(userId, null, 'chat', { fallback: true });
    if (model.connectionId === null && !(await this.hasBudget(userId))) return;
    const messages: ChatMessage[] = [
      { role: 'system', content: `${TITLE_INSTRUCTION}\n\nThe assistant answered:\n${reply.slice(0, EXCERPT)}` },
      { role: 'user', content: message.slice(0, EXCERPT) },
    ];
    // Under a quota the title's call holds its bound first; a quota without room keeps the cut title.
    const hold = model.connectionId === null ? await this.reserve(userId, model.info, messages) : null;
    if (hold === undefined) return;
    try {
      const result = await model.caller.generate({
        model: model.providerModelId,
        messages,
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), this.stopping.signal]),
        ...(hold ? { settings: { maxOutputTokens: TITLE_OUTPUT_TOKENS } } : {}),
      });
      const title = titleOfAnswer(result.text);
      await db.transaction().execute(async (trx) => {
        await billing.charge(trx, {
          userId,
          kind: 'chat.title',
          resourceId: `${replyId}:title`,
          model: model.info,
          connectionId: model.connectionId,
          usage: result.usage,
          at: new Date(),
          hold,
        });
        if (title !== null) await repo.replaceTitle(trx, conversationId, titleFrom(message), title);
      });
    } finally {
      await billing.release(hold);
    }
  }

  /** The title call's hold (null: no quota applies), or undefined when a quota has no room for it. */
  private async reserve(userId: string, model: ModelInfo, messages: ChatMessage[]): Promise<Hold | null | undefined> {
    try {
      return await this.deps.billing.reserve(userId, {
        model,
        usage: { inputTokens: promptTokenBound(messages), outputTokens: TITLE_OUTPUT_TOKENS },
      });
    } catch (error) {
      if (error instanceof ApiError && error.code === 'quota_exceeded') return undefined;
      throw error;
    }
  }

  /** Whether the caller may still spend on the deployment's models (a spent budget keeps the cut title). */
  private async hasBudget(userId: string): Promise<boolean> {
    try {
      await this.deps.billing.requireBudget(userId);
      return true;
    } catch (error) {
      if (error instanceof ApiError && error.code === 'budget_exhausted') return false;
      throw error;
    }
  }
}
