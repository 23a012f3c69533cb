import type { Response } from 'express';
import { type HandlerMap, STREAMED } from '../../http/handler';
import { presentCompletion, presentModels } from './presenter';
import type { OpenAiService } from './service';
import { streamCompletion } from './stream-route';

/** Aborts when the client goes away before the answer is complete: the model call stops. */
function cancelOnClose(res: Response): AbortSignal {
  const client = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) client.abort(new Error('the client closed the connection'));
  });
  return client.signal;
}

/** The OpenAI-compatible API under `/v1` (tag `OpenAI compatible`); its errors are answered in OpenAI's shape (src/http/error-shape.ts). */
export function openAiHandlers(service: OpenAiService): Pick<HandlerMap, 'listOpenAIModels' | 'createChatCompletion' | 'createEmbeddings'> {
  return {
    listOpenAIModels: async ({ caller }) => presentModels(await service.list(caller.userId)),
    createChatCompletion: async ({ caller, body, res }) => {
      const client = cancelOnClose(res);
      const prepared = await service.prepare(caller.userId, body, client);
      if (!body.stream) return presentCompletion(prepared.head, await service.complete(prepared, client));
      await streamCompletion(service, prepared, res, client, body.stream_options?.include_usage === true);
      return STREAMED;
    },
    createEmbeddings: async ({ caller, body }) => service.embed(caller.userId, body),
  };
}
