import * as stream from './repository';
import type { Database } from '../../platform/db';

/** How long a reply's events wait to be stored together; deltas written together are one row. */
const FLUSH_MS = 50;

/**
 * A reply's stream events as they are sent: each gets its SSE id at once, and they are stored in
 * the background (batched, never awaited before an event is sent), for `watchReply`.
 */
export class ReplyStreamWriter {
  private seq = 0;
  private buffer: stream.StoredEventRow[] = [];
  private pieces: number[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Database,
    private readonly replyId: string,
    private readonly onError: (error: Error) => void,
  ) {}

  /** Records an event; returns its SSE id. A final event is stored at once. */
  append(event: string, data: unknown, final = false): number {
    this.seq += 1;
    const last = this.buffer.at(-1);
    if (event === 'delta' && last?.event === 'delta') {
      const text = (data as { text: string }).text;
      const stored = last.data as { text: string; pieces?: number[] };
      this.pieces.push(text.length);
      last.data = { text: stored.text + text, pieces: [...this.pieces] };
      last.seq = this.seq;
    } else {
      this.pieces = event === 'delta' ? [(data as { text: string }).text.length] : [];
      this.buffer.push({ seq: this.seq, first_seq: this.seq, event, data });
    }
    if (final) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS).unref();
    return this.seq;
  }

  /** Stores what is buffered, after what was stored before; resolves once it is. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const rows = this.buffer;
    this.buffer = [];
    this.pieces = [];
    this.writing = this.writing
      .then(() => stream.insertEvents(this.db, this.replyId, rows))
      .catch((error: unknown) => this.onError(error as Error));
    return this.writing;
  }
}
