import type { components } from '../../../generated/api';
import { millis } from '../../platform/db/timestamps';
import { presentRecordedUsage } from '../../platform/usage';
import type { AdminFeedbackView, FeedbackRow, FeedbackView } from './repository';

type Schemas = components['schemas'];

export function presentFeedback(row: FeedbackRow | FeedbackView): Schemas['MessageFeedback'] {
  return {
    feedbackId: row.id,
    messageId: row.message_id,
    conversationId: row.conversation_id,
    rating: row.rating as Schemas['FeedbackRating'],
    reason: row.reason,
    comment: row.comment,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}

export function presentAdminFeedback(row: AdminFeedbackView): Schemas['AdminFeedback'] {
  return {
    feedbackId: row.id,
    userId: row.user_id,
    conversationId: row.conversation_id,
    messageId: row.message_id,
    rating: row.rating as Schemas['FeedbackRating'],
    reason: row.reason,
    comment: row.comment,
    model: row.model,
    usage: presentRecordedUsage(row),
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}
