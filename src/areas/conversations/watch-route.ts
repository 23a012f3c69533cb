import type { Response } from 'express';
import { STREAMED } from '../../http/handler';
import { EventStream } from '../../http/sse';
import type { ReplyWatch } from './reply-watch';

/**
 * Answers `watchReply`: the reply's events after `Last-Event-ID` as server-sent events, `204`
 * when the client has its final event already. Closing the stream ends only this watch.
 */
export async function watchReply(
  watch: ReplyWatch,
  userId: string,
  messageId: string,
  lastEventId: string | undefined,
  res: Response,
): Promise<typeof STREAMED> {
  await watch.reply(userId, messageId);
  const closed = new AbortController();
  res.on('close', () => closed.abort());
  const stream = new EventStream(res);
  let sent = 0;
  for await (const event of watch.follow(userId, messageId, lastEventId === undefined ? 0 : Number(lastEventId), closed.signal)) {
    if (sent === 0) stream.open();
    stream.send(event.event, event.data, event.id);
    sent += 1;
  }
  if (sent === 0 && !res.headersSent) res.status(204);
  stream.end();
  return STREAMED;
}
