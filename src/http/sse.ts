import type { Response } from 'express';
import { leaveInFlight } from './load-shed';

/**
 * A server-sent event stream on a response: opened (status and headers sent) by the first event,
 * so that anything refused before it is still answered as a JSON error.
 */
export class EventStream {
  private opened = false;

  constructor(private readonly res: Response) {}

  /** Sends the status and headers now (a stream whose first event may take a while). */
  open(): void {
    this.send(null, null);
  }

  /** Sends an event (with its SSE `id` when given); `null` only opens the stream. */
  send(event: string | null, data: unknown, id?: number): void {
    if (!this.opened) {
      this.opened = true;
      leaveInFlight(this.res);
      this.res.status(200).set({
        'Content-Type': 'text/event-stream; charset=utf-8',
        'Cache-Control': 'no-cache, no-transform',
        'X-Accel-Buffering': 'no',
      });
    }
    // The first write sends the headers with the first event, in one packet.
    if (event === null) {
      this.res.flushHeaders();
      return;
    }
    const head = id === undefined ? '' : `id: ${id}\n`;
    if (!this.res.writableEnded) this.res.write(`${head}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  end(): void {
    if (!this.res.writableEnded) this.res.end();
  }
}
