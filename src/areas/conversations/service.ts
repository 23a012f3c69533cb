import { ApiError, errors } from '../../platform/errors';
import type { RequestInput } from '../../platform/api-types';
import { type Database, PgError, pgErrorCode } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import type { PageRequest } from '../../platform/pagination';
import type { ModelService } from '../models/service';
import type { ProjectService } from '../projects/service';
import type { SkillService } from '../skills/service';
import * as repo from './repository';
import { skillAsked } from './skill-turn';

type CreateInput = RequestInput<'ConversationCreateRequest'>;
type UpdateInput = RequestInput<'ConversationUpdateRequest'>;

/** How many temporary conversations one statement of the sweep deletes. */
const SWEEP_BATCH = 500;

export interface ConversationServiceDeps {
  db: Database;
  projects: Pick<ProjectService, 'requireOwnedIfNamed'>;
  models: Pick<ModelService, 'check'>;
  skills: Pick<SkillService, 'get' | 'forChat'>;
}

/**
 * The caller's conversations: their records, their messages, and the greetings agents post in them.
 * The turns of a conversation (a message and its reply) are the turn engine's (turn-engine.ts).
 */
export class ConversationService {
  private readonly db: Database;
  private readonly projects: Pick<ProjectService, 'requireOwnedIfNamed'>;
  private readonly models: Pick<ModelService, 'check'>;
  private readonly skills: Pick<SkillService, 'get' | 'forChat'>;

  constructor({ db, projects, models, skills }: ConversationServiceDeps) {
    this.db = db;
    this.projects = projects;
    this.models = models;
    this.skills = skills;
  }

  async get(userId: string, conversationId: string): Promise<repo.ConversationRow> {
    const row = await repo.findConversation(this.db, userId, conversationId);
    if (!row) throw errors.notFound('Conversation not found.');
    return row;
  }

  /** Throws 404 naming the body `field` unless `conversationId` is one of the caller's (used by other areas). */
  async requireOwned(userId: string, conversationId: string, field = 'conversationId'): Promise<void> {
    if (!(await repo.findConversation(this.db, userId, conversationId))) throw errors.referenceNotFound(field, 'Conversation not found.');
  }

  /** A page of the caller's conversations; temporary ones are never listed. */
  async list(userId: string, filter: { projectId?: string; archived?: boolean }, page: PageRequest) {
    return repo.conversationList.page(this.db, { ownerUserId: userId, ...filter, temporary: false }, page);
  }

  async create(userId: string, input: CreateInput): Promise<repo.ConversationRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    if (input.model !== undefined) await this.checkModel(userId, input.model);
    const now = new Date();
    return repo.insertConversation(this.db, {
      id: uuidv7(now.getTime()),
      owner_user_id: userId,
      project_id: input.projectId ?? null,
      title: input.title ?? '',
      model: input.model ?? null,
      temporary: input.temporary ?? false,
      created_at: now,
      updated_at: now,
    });
  }

  async update(userId: string, input: UpdateInput): Promise<repo.ConversationRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    if (input.model !== undefined && input.model !== null) await this.checkModel(userId, input.model);
    // Switching branch: to the leaf below the message named (its conversation must be this one).
    const currentLeafId =
      input.currentLeafId === undefined
        ? undefined
        : await this.get(userId, input.conversationId).then(() =>
            this.leafThrough(input.conversationId, input.currentLeafId!, 'currentLeafId'),
          );
    const updated = await repo.updateConversation(this.db, userId, input.conversationId, {
      current_leaf_id: currentLeafId,
      title: input.title,
      project_id: input.projectId,
      archived: input.archived,
      model: input.model,
      updated_at: new Date(),
    });
    if (!updated) throw errors.notFound('Conversation not found.');
    return updated;
  }

  /** A conversation's model: a chat model the caller may use, or a skill they may chat with (`skill:<skillId>`). */
  private async checkModel(userId: string, model: string): Promise<void> {
    const { skill } = skillAsked({ model });
    if (skill) await this.skills.forChat(userId, skill.id, 'model');
    else await this.models.check(userId, model, 'chat');
  }

  /**
   * Deletes, with their messages, the temporary conversations last active more than `ttlMs` ago
   * (in batches); their usage records stay. Resolves with how many.
   */
  async sweepTemporary(ttlMs: number, now = new Date()): Promise<number> {
    const before = new Date(now.getTime() - ttlMs);
    let total = 0;
    for (let deleted = SWEEP_BATCH; deleted === SWEEP_BATCH; total += deleted) {
      deleted = await repo.deleteIdleTemporary(this.db, before, SWEEP_BATCH);
    }
    return total;
  }

  /** The caller's message `messageId` (in one of their conversations); 404 naming the body `field` otherwise. */
  async message(userId: string, messageId: string, field: string | null = 'messageId'): Promise<repo.MessageRow> {
    const message = await repo.findOwnedMessage(this.db, userId, messageId);
    if (!message) throw field === null ? errors.notFound('Message not found.') : errors.referenceNotFound(field, 'Message not found.');
    return message;
  }

  async delete(userId: string, conversationId: string): Promise<void> {
    if (!(await repo.deleteConversation(this.db, userId, conversationId))) throw errors.notFound('Conversation not found.');
  }

  /**
   * A page of a conversation's messages: the branch it shows (or the one through `leafId`), each
   * message with its siblings, or with `view: 'tree'` every message.
   */
  async messages(userId: string, conversationId: string, shown: { leafId?: string; view?: 'branch' | 'tree' }, page: PageRequest) {
    const conversation = await this.get(userId, conversationId);
    if (shown.view === 'tree') {
      if (shown.leafId !== undefined)
        throw errors.invalidRequest('leafId names a branch: it is not given with view=tree.', [
          { path: '/query/leafId', message: 'must not be given with view=tree' },
        ]);
      return this.withSiblings(conversationId, await repo.messageList.page(this.db, { conversationId }, page));
    }
    const leafId =
      shown.leafId === undefined ? conversation.current_leaf_id : await this.leafThrough(conversationId, shown.leafId, 'leafId');
    return this.withSiblings(conversationId, await repo.branchPage(this.db, conversationId, leafId, page));
  }

  /**
   * Deletes a message of the caller's and the messages below it (`409` while a reply among them is
   * generated); a conversation whose branch was deleted shows the newest one left.
   */
  async deleteMessage(userId: string, messageId: string) {
    const message = await repo.findOwnedMessage(this.db, userId, messageId);
    if (!message) throw errors.notFound('Message not found.');
    return this.db.transaction().execute(async (trx) => {
      const conversation = await repo.lockConversation(trx, userId, message.conversation_id);
      const below = await repo.subtreeOf(trx, message.id);
      if (!conversation || below.count === 0) throw errors.notFound('Message not found.');
      if (below.generating)
        throw errors.conflict('A reply below this message is still being written: stop it or wait for it to end, then delete.');
      await repo.deleteMessage(trx, message.id);
      // The branch shown went with it (its leaf was set to null): the newest one under the parent, or the newest tree.
      let currentLeafId = (await repo.findConversation(trx, userId, conversation.id))?.current_leaf_id ?? null;
      if (currentLeafId === null) {
        const from = message.parent_id ?? (await repo.newestRoot(trx, conversation.id));
        currentLeafId = from ? ((await repo.leafBelow(trx, conversation.id, from)) ?? null) : null;
      }
      await repo.updateConversation(trx, userId, conversation.id, { current_leaf_id: currentLeafId, updated_at: new Date() });
      return { deletedCount: below.count, currentLeafId };
    });
  }

  /** The leaf of the branch through `messageId`, a message of the conversation (else 404 naming the `field` of the body or query). */
  private async leafThrough(conversationId: string, messageId: string, field: 'currentLeafId' | 'leafId'): Promise<string> {
    const leaf = await repo.leafBelow(this.db, conversationId, messageId);
    const message = `Message not found: ${field} must be a message of the conversation.`;
    if (!leaf) throw field === 'leafId' ? errors.notFound(message) : errors.referenceNotFound(field, message);
    return leaf;
  }

  /** A page of messages, each with the ids of its siblings (its own among them). */
  private async withSiblings<T extends { parent_id: string | null }>(
    conversationId: string,
    page: { items: T[]; nextCursor: string | null },
  ) {
    const children = await repo.childrenOf(
      this.db,
      conversationId,
      page.items.map((m) => m.parent_id),
    );
    return { items: page.items.map((m) => ({ row: m, siblingIds: children.get(m.parent_id) ?? [] })), nextCursor: page.nextCursor };
  }

  /** The skill's greeting in the conversation, posted once; `field` is the request's name of the skill id, for a 404. */
  async greet(userId: string, conversationId: string, skillId: string, field: 'skillId' | 'agentId'): Promise<repo.MessageRow> {
    const conversation = await this.get(userId, conversationId);
    const skill = await this.skills.get(userId, skillId).catch((error: unknown) => {
      if (error instanceof ApiError && error.status === 404)
        throw errors.referenceNotFound(field, `Skill not found: ${field} must be one of your skills.`);
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
          // The greeting follows the branch the conversation shows, and ends it.
          parent_id: conversation.current_leaf_id,
          created_at: now,
          updated_at: now,
        });
        await repo.updateConversation(trx, userId, conversation.id, { updated_at: now, current_leaf_id: message.id });
        return message;
      });
    } catch (error) {
      // The branch it was to follow was deleted meanwhile.
      if (pgErrorCode(error) === PgError.foreignKeyViolation)
        throw errors.conflict('The conversation changed meanwhile; post the greeting again.');
      // The same greeting posted by a concurrent call: answer that one.
      if (pgErrorCode(error) !== PgError.uniqueViolation) throw error;
      return (await repo.findGreeting(this.db, conversation.id, skill.id)) as repo.MessageRow;
    }
  }
}
