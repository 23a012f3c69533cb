import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { presentAdminFeedback, presentFeedback } from './presenter';
import type { FeedbackService } from './service';

export function feedbackHandlers(
  feedback: FeedbackService,
): Pick<HandlerMap, 'getMessageFeedback' | 'setMessageFeedback' | 'deleteMessageFeedback' | 'listAdminFeedback'> {
  return {
    getMessageFeedback: async ({ caller, query }) => {
      const page = await feedback.ofConversation(caller.userId, query.conversationId, readPage(query));
      return { feedback: page.items.map(presentFeedback), nextCursor: page.nextCursor };
    },
    setMessageFeedback: async ({ caller, body }) => ({ feedback: presentFeedback(await feedback.set(caller.userId, body)) }),
    deleteMessageFeedback: async ({ caller, query, body }) => {
      const messageId = idFromQueryOrBody('messageId', query, body);
      await feedback.remove(caller.userId, messageId);
      return { messageId, deleted: true };
    },
    listAdminFeedback: async ({ query }) => {
      const page = await feedback.list({ rating: query.rating }, readPage(query));
      return { feedback: page.items.map(presentAdminFeedback), nextCursor: page.nextCursor };
    },
  };
}
