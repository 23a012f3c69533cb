import { createHash } from 'node:crypto';
import { Transform, type TransformCallback, type Readable } from 'node:stream';

/** A byte range, both ends included (as in HTTP). */
export interface ByteRange {
  start: number;
  end: number;
}

export interface StoredObject {
  size: number;
  sha256: string;
}

/**
 * Where file and output bytes live. Implementations stream in both directions (never buffering an
 * object), and `put` makes an object visible only once it is complete.
 */
export interface ObjectStore {
  readonly kind: 'local' | 's3';
  /**
   * Stores `body` under `key`: exactly `size` bytes. More fail as soon as they arrive
   * (ObjectTooLargeError), fewer at the end (ObjectIncompleteError); either way nothing is stored.
   */
  put(key: string, body: Readable, options: { contentType: string; size: number }): Promise<StoredObject>;
  /** The object's bytes (or a range of them); ObjectNotFoundError when missing. */
  get(key: string, range?: ByteRange): Promise<Readable>;
  delete(key: string): Promise<void>;
  /**
   * Removes what uploads that never ended (the process stopped mid-upload) left behind, once older
   * than `maxAgeMs`; never an upload in progress. Resolves with how many it removed.
   */
  sweepIncoming(maxAgeMs: number, now?: Date): Promise<number>;
  /** Whether the store answers (for /readyz). */
  isReachable(): Promise<boolean>;
  /** Releases connections. */
  close(): void;
}

export class ObjectTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`more than ${maxBytes} bytes`);
  }
}

export class ObjectIncompleteError extends Error {
  constructor(
    readonly expected: number,
    readonly received: number,
  ) {
    super(`${received} of ${expected} bytes`);
  }
}

export class ObjectNotFoundError extends Error {}

/** The store cannot be reached or cannot store right now (network, server, disk): try again later. */
export class StorageUnavailableError extends Error {
  override name = 'StorageUnavailableError';
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]);
const DISK_CODES = new Set(['EACCES', 'EPERM', 'ENOSPC', 'EDQUOT', 'EROFS', 'EIO', 'EMFILE', 'ENFILE']);

/**
 * `error` as StorageUnavailableError when it means the store is out of reach: for S3 a network
 * error, a timeout or a 5xx answer; for the local directory a disk error (a full, read-only or
 * inaccessible disk). Anything else (a client that went away, a missing object) is returned as is.
 */
export function asUnavailable(error: unknown, store: 's3' | 'local'): unknown {
  const e = error as { code?: string; name?: string; $metadata?: { httpStatusCode?: number }; message?: string } | null;
  const status = e?.$metadata?.httpStatusCode;
  const unavailable =
    store === 'local'
      ? e?.code !== undefined && DISK_CODES.has(e.code)
      : (e?.code !== undefined && NETWORK_CODES.has(e.code)) ||
        // The SDK may wrap a socket error into a plain Error that keeps only its message.
        [...NETWORK_CODES].some((code) => e?.message?.includes(code)) ||
        e?.name === 'TimeoutError' ||
        (status !== undefined && status >= 500);
  return unavailable ? new StorageUnavailableError(e?.message ?? 'the object store is unavailable', { cause: error }) : error;
}

/**
 * How much a stored object's stream buffers between its ends: 1 MiB rather than the streams'
 * 16-64 KiB, so that a large upload is written (and a download read) in few, large calls instead of
 * thousands of small ones. A constant bound per transfer, never the object.
 */
export const STREAM_BUFFER_BYTES = 1024 * 1024;

/**
 * Passes bytes through while counting and hashing them; fails with ObjectTooLargeError as soon as
 * more than `maxBytes` have passed.
 */
export class MeasuringStream extends Transform {
  private readonly hash = createHash('sha256');
  size = 0;

  constructor(private readonly maxBytes: number) {
    super({ highWaterMark: STREAM_BUFFER_BYTES });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) return callback(new ObjectTooLargeError(this.maxBytes));
    this.hash.update(chunk);
    callback(null, chunk);
  }

  /** The size and hash, once the stream has ended with exactly `maxBytes` bytes. */
  complete(): StoredObject {
    if (this.size !== this.maxBytes) throw new ObjectIncompleteError(this.maxBytes, this.size);
    return { size: this.size, sha256: this.hash.digest('hex') };
  }
}
