import type { RequestInput } from '../../platform/api-types';
import { errors } from '../../platform/errors';
import { type Database, PgError, pgErrorCode } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import type { PageRequest } from '../../platform/pagination';
import type { ConversationService } from '../conversations/service';
import type { WebhookService } from '../webhooks/service';
import * as repo from './repository';

type FeedbackInput = RequestInput<'MessageFeedbackRequest'>;

export interface FeedbackServiceDeps {
  db: Database;
  conversations: Pick<ConversationService, 'message' | 'get'>;
  webhooks: Pick<WebhookService, 'emitEvent'>;
}

/** Users' feedback on assistant replies (one per user and reply, changeable), and the administrators' view of it. */
export class FeedbackService {
  private readonly db: Database;
  private readonly conversations: Pick<ConversationService, 'message' | 'get'>;
  private readonly webhooks: Pick<WebhookService, 'emitEvent'>;

  constructor({ db, conversations, webhooks }: FeedbackServiceDeps) {
    this.db = db;
    this.conversations = conversations;
    this.webhooks = webhooks;
  }

  /**
   * Gives or replaces the caller's feedback on a reply of theirs, with `message.feedback` in the
   * same transaction: 404 for a message that is not theirs, 400 for one that is not a reply, 409
   * for a reply that has not ended.
   */
  async set(userId: string, input: FeedbackInput): Promise<repo.FeedbackRow> {
    const message = await this.conversations.message(userId, input.messageId);
    if (message.role !== 'assistant' || message.kind !== 'reply') {
      throw errors.invalidRequest('Feedback is given on assistant replies only.', [
        { path: '/body/messageId', message: 'must be an assistant reply (not a user message or a greeting)' },
      ]);
    }
    if (message.status === 'generating' || message.status === 'awaiting_approval')
      throw errors.conflict('The reply has not ended yet; give feedback once it has.');
    const now = new Date();
    const written = this.db.transaction().execute(async (trx) => {
      const feedback = await repo.upsertFeedback(trx, {
        id: uuidv7(now.getTime()),
        message_id: message.id,
        conversation_id: message.conversation_id,
        user_id: userId,
        rating: input.rating,
        reason: input.reason ?? null,
        comment: input.comment ?? null,
        created_at: now,
        updated_at: now,
      });
      await this.webhooks.emitEvent(trx, 'message.feedback', userId, {
        feedbackId: feedback.id,
        conversationId: feedback.conversation_id,
        messageId: feedback.message_id,
        model: message.model,
        rating: feedback.rating as FeedbackInput['rating'],
        reason: feedback.reason,
        comment: feedback.comment,
      });
      return feedback;
    });
    return written.catch((error: unknown) => {
      // The reply's conversation was deleted meanwhile (by its owner, or the temporary sweep).
      if (pgErrorCode(error) === PgError.foreignKeyViolation) throw errors.referenceNotFound('messageId', 'Message not found.');
      throw error;
    });
  }

  /** Removes the caller's feedback on a reply of theirs; 404 when the message is not theirs or has none. */
  async remove(userId: string, messageId: string): Promise<void> {
    await this.conversations.message(userId, messageId, null);
    if (!(await repo.deleteFeedback(this.db, userId, messageId))) throw errors.notFound('You gave no feedback on this message.');
  }

  /** A page of the caller's feedback in their conversation `conversationId` (404 when it is not theirs). */
  async ofConversation(userId: string, conversationId: string, page: PageRequest) {
    await this.conversations.get(userId, conversationId);
    return repo.conversationFeedbackList.page(this.db, { userId, conversationId }, page);
  }

  /** A page of everyone's feedback (administrators), newest first, optionally of one rating. */
  list(filter: { rating?: 'up' | 'down' }, page: PageRequest) {
    return repo.adminFeedbackList.page(this.db, filter, page);
  }
}
