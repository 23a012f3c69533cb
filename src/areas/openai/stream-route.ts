import type { Response } from 'express';
import { errorBody } from '../../http/error-shape';
import { leaveInFlight } from '../../http/load-shed';
import { ApiError } from '../../platform/errors';
import { ChunkPresenter } from './presenter';
import type { OpenAiService, PreparedCompletion } from './service';

/**
 * Answers a streamed completion as OpenAI's server-sent events: `data: <chunk JSON>` events, then
 * `data: [DONE]`. The stream opens (status and headers, with the role chunk) with the model's
 * first piece, so that everything refused before it (the provider's failure or timeout before
 * its first token) is still a JSON error answer; a failure after it is one `data: { "error": … }`
 * event in OpenAI's shape, ending the stream without `[DONE]`.
 */
export async function streamCompletion(
  service: Pick<OpenAiService, 'stream'>,
  prepared: PreparedCompletion,
  res: Response,
  client: AbortSignal,
  includeUsage: boolean,
): Promise<void> {
  const chunks = new ChunkPresenter(prepared.head, includeUsage);
  const event = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
  let opened = false;
  // The first write carries the headers, the role chunk and the first piece, in one packet.
  const send = (data: unknown, end = false) => {
    let text = event(data);
    if (!opened) {
      opened = true;
      leaveInFlight(res);
      res.status(200).set({
        'Content-Type': 'text/event-stream; charset=utf-8',
        'Cache-Control': 'no-cache, no-transform',
        'X-Accel-Buffering': 'no',
      });
      text = event(chunks.start()) + text;
    }
    if (res.writableEnded) return;
    if (end) res.end(text);
    else res.write(text);
  };
  try {
    const outcome = await service.stream(prepared, client, {
      text: (text) => send(chunks.text(text)),
      toolCall: (call, index) => send(chunks.toolCall(call, index)),
    });
    send(chunks.finish(outcome));
    const usage = chunks.usage(outcome.usage);
    if (usage) send(usage);
    if (!res.writableEnded) res.end('data: [DONE]\n\n');
  } catch (error) {
    // Before the first piece, the error middleware answers it as JSON; an unexpected error after it cuts the stream.
    if (!opened || !(error instanceof ApiError)) throw error;
    send(errorBody(error, 'openai'), true);
  }
}
