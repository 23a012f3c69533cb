import type { Response } from 'express';
import { errors } from '../../platform/errors';
import { type HandlerMap, idFromQueryOrBody, STREAMED } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { EventStream } from '../../http/sse';
import { presentApproval, presentCitations, presentConversation, presentMessage } from './presenter';
import type { Chat } from './chat';
import type { ConversationService } from './service';
import type { SendOutcome } from './turn';
import type { TurnEngine } from './turn-engine';
import type { ReplyStreamWriter } from './reply-stream';
import { watchReply } from './watch-route';

/** The error answer of a failed reply (a cancelled one is answered like a provider error). */
function failureError(outcome: SendOutcome, timeoutMs: number) {
  return outcome.failure?.code === 'model_provider_timeout'
    ? errors.modelProviderTimeout(`The model provider did not answer within ${timeoutMs} ms.`, { messageId: outcome.reply.id })
    : errors.modelProviderError(outcome.failure?.error ?? 'unknown failure', { messageId: outcome.reply.id });
}

/** A turn run with hooks: a message sent, or a reply written again. */
type RunTurn = (hooks: Parameters<TurnEngine['send']>[2]) => Promise<SendOutcome>;

/** Cancels the reply when the client goes away before the answer is complete. */
function cancelOnClose(res: Response): AbortSignal {
  const client = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) client.abort(new Error('the client closed the connection'));
  });
  return client.signal;
}

/** Runs a turn answered as server-sent events (`ChatEventStream`), the one streaming path of both operations. */
async function streamReply(watch: Chat['watch'], runTurn: RunTurn, res: Response, timeoutMs: number): Promise<typeof STREAMED> {
  const stream = new EventStream(res);
  // Each event gets its id and is stored for watchers in the background (see `ReplyStreamWriter`).
  let writer: ReplyStreamWriter | null = null;
  const events = {
    send: (event: string, data: unknown, final = false) => stream.send(event, data, writer?.append(event, data, final)),
  };
  const outcome = await runTurn({
    signal: cancelOnClose(res),
    onStart: (message, reply) => {
      writer = watch.writer(reply.id);
      events.send('message', { message: presentMessage(message), reply: presentMessage(reply) });
    },
    onCitations: (citations, retrieval) => events.send('citations', { citations: presentCitations(citations), retrieval }),
    onDelta: (text) => events.send('delta', { text }),
    onToolCall: (part) => events.send('tool-call', { part }),
    onToolResult: (part) => events.send('tool-result', { part }),
    onToolSourceUnavailable: (part) => events.send('tool-source-unavailable', { part }),
  });
  if (outcome.approval) {
    events.send('approval-required', { approval: presentApproval(outcome.approval), message: presentMessage(outcome.reply) }, true);
  } else if (outcome.failure) {
    const { message } = failureError(outcome, timeoutMs);
    events.send('error', { error: message, code: outcome.failure.code, message: presentMessage(outcome.reply) }, true);
  } else if (outcome.reply.status === 'stopped') {
    events.send('stopped', { message: presentMessage(outcome.reply) }, true);
  } else {
    events.send('done', { message: presentMessage(outcome.reply) }, true);
  }
  stream.end();
  return STREAMED;
}

export function conversationHandlers(
  conversations: ConversationService,
  { turns, approvals, watch }: Pick<Chat, 'turns' | 'approvals' | 'watch'>,
  timeoutMs: number,
): Pick<
  HandlerMap,
  | 'getConversations'
  | 'createConversation'
  | 'updateConversation'
  | 'deleteConversation'
  | 'getMessages'
  | 'sendMessage'
  | 'streamMessage'
  | 'regenerateMessage'
  | 'streamRegeneration'
  | 'deleteMessage'
  | 'stopReply'
  | 'watchReply'
  | 'postAgentGreeting'
  | 'getApprovals'
  | 'decideApproval'
> {
  return {
    getConversations: async ({ caller, query }) => {
      if (query.conversationId !== undefined) {
        return { conversation: presentConversation(await conversations.get(caller.userId, query.conversationId)) };
      }
      const filter = { projectId: query.projectId, archived: query.archived };
      const page = await conversations.list(caller.userId, filter, readPage(query));
      return { conversations: page.items.map(presentConversation), nextCursor: page.nextCursor };
    },
    createConversation: async ({ caller, body }) => ({
      conversation: presentConversation(await conversations.create(caller.userId, body)),
    }),
    updateConversation: async ({ caller, body }) => ({
      conversation: presentConversation(await conversations.update(caller.userId, body)),
    }),
    deleteConversation: async ({ caller, query, body }) => {
      const conversationId = idFromQueryOrBody('conversationId', query, body);
      await conversations.delete(caller.userId, conversationId);
      return { conversationId, deleted: true };
    },
    getMessages: async ({ caller, query }) => {
      const shown = { leafId: query.leafId, view: query.view };
      const page = await conversations.messages(caller.userId, query.conversationId, shown, readPage(query));
      return { messages: page.items.map(({ row, siblingIds }) => presentMessage(row, siblingIds)), nextCursor: page.nextCursor };
    },
    sendMessage: async ({ caller, body, req, res }) => {
      if (body.stream && req.get('idempotency-key') !== undefined) {
        throw errors.invalidRequest('A streamed reply cannot be replayed: send Idempotency-Key only without stream.', [
          { path: '/headers/idempotency-key', message: 'must not be sent with stream: true' },
        ]);
      }
      // 1.0.0 clients' `stream: true` gets the streaming operation's answer.
      if (body.stream) return streamReply(watch, (hooks) => turns.send(caller.userId, body, hooks), res, timeoutMs);
      const outcome = await turns.send(caller.userId, body, { signal: cancelOnClose(res) });
      if (outcome.failure) throw failureError(outcome, timeoutMs);
      return { message: presentMessage(outcome.message), reply: presentMessage(outcome.reply) };
    },
    streamMessage: async ({ caller, body, res }) => streamReply(watch, (hooks) => turns.send(caller.userId, body, hooks), res, timeoutMs),
    regenerateMessage: async ({ caller, body, res }) => {
      const outcome = await turns.regenerate(caller.userId, body, { signal: cancelOnClose(res) });
      if (outcome.failure) throw failureError(outcome, timeoutMs);
      return { message: presentMessage(outcome.message), reply: presentMessage(outcome.reply) };
    },
    streamRegeneration: async ({ caller, body, res }) =>
      streamReply(watch, (hooks) => turns.regenerate(caller.userId, body, hooks), res, timeoutMs),
    deleteMessage: async ({ caller, query, body }) => {
      const messageId = idFromQueryOrBody('messageId', query, body);
      const { deletedCount, currentLeafId } = await conversations.deleteMessage(caller.userId, messageId);
      return { messageId, deleted: true, deletedCount, currentLeafId };
    },
    stopReply: async ({ caller, body }) => ({ message: presentMessage(await watch.stop(caller.userId, body.messageId)) }),
    watchReply: async ({ caller, query, req, res }) => watchReply(watch, caller.userId, query.messageId, req.get('last-event-id'), res),
    getApprovals: async ({ caller, query }) => {
      if (query.approvalId !== undefined) return { approval: presentApproval(await approvals.approval(caller.userId, query.approvalId)) };
      const page = await approvals.pendingApprovals(caller.userId, readPage(query));
      return { approvals: page.items.map(presentApproval), nextCursor: page.nextCursor };
    },
    decideApproval: async ({ actor, body }) => {
      const { approval, reply } = await approvals.decide(actor, {
        approvalId: body.approvalId,
        decision: body.decision,
        arguments: body.arguments,
      });
      return { approval: presentApproval(approval), reply: presentMessage(reply) };
    },
    postAgentGreeting: async ({ caller, body }) => {
      // The document's oneOf lets exactly one of the two names through.
      const [field, skillId] = body.skillId !== undefined ? (['skillId', body.skillId] as const) : (['agentId', body.agentId!] as const);
      return { message: presentMessage(await conversations.greet(caller.userId, body.conversationId, skillId, field)) };
    },
  };
}
