import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  asUnavailable,
  type ByteRange,
  MeasuringStream,
  ObjectNotFoundError,
  type ObjectStore,
  STREAM_BUFFER_BYTES,
  type StoredObject,
} from './index';

/** Temporary files of the uploads in progress in this process (any store over the directory): never swept. */
const writing = new Set<string>();

/** Objects as files under a directory; written to a temporary file and renamed into place when complete. */
export class LocalObjectStore implements ObjectStore {
  readonly kind = 'local' as const;
  private readonly tmp: string;

  constructor(private readonly root: string) {
    this.tmp = path.join(root, '.incoming');
    fs.mkdirSync(this.tmp, { recursive: true });
  }

  private pathOf(key: string): string {
    const file = path.resolve(this.root, key);
    if (!file.startsWith(`${this.root}${path.sep}`) || key.startsWith('.')) throw new Error(`invalid object key ${key}`);
    return file;
  }

  async put(key: string, body: Readable, options: { size: number }): Promise<StoredObject> {
    const target = this.pathOf(key);
    const temporary = path.join(this.tmp, randomUUID());
    writing.add(temporary);
    const measure = new MeasuringStream(options.size);
    const file = fs.createWriteStream(temporary, { flags: 'wx', highWaterMark: STREAM_BUFFER_BYTES });
    try {
      await pipeline(body, measure, file);
      const stored = measure.complete();
      await fs.promises.mkdir(path.dirname(target), { recursive: true });
      await fs.promises.rename(temporary, target);
      return stored;
    } catch (error) {
      // The file may still be opening when the body fails: removed only once it is closed.
      if (!file.closed) await new Promise<void>((resolve) => file.once('close', () => resolve()));
      await fs.promises.rm(temporary, { force: true });
      throw asUnavailable(error, 'local');
    } finally {
      writing.delete(temporary);
    }
  }

  /**
   * Removes the temporary files last written more than `maxAgeMs` ago: partial objects of uploads
   * that stopped with their process. An upload in progress in this process is skipped whatever its
   * age; one in another process sharing the directory keeps its file's time fresh as it writes.
   */
  async sweepIncoming(maxAgeMs: number, now: Date = new Date()): Promise<number> {
    const cutoff = now.getTime() - maxAgeMs;
    let removed = 0;
    for (const name of await fs.promises.readdir(this.tmp)) {
      const file = path.join(this.tmp, name);
      if (writing.has(file)) continue;
      const stat = await fs.promises.stat(file).catch(() => null); // gone meanwhile
      if (!stat?.isFile() || stat.mtimeMs >= cutoff || writing.has(file)) continue;
      await fs.promises.rm(file, { force: true });
      removed += 1;
    }
    return removed;
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const file = this.pathOf(key);
    const handle = await fs.promises.open(file, 'r').catch((error: NodeJS.ErrnoException) => {
      throw error.code === 'ENOENT' ? new ObjectNotFoundError(key) : asUnavailable(error, 'local');
    });
    return handle.createReadStream({ highWaterMark: STREAM_BUFFER_BYTES, ...(range ? { start: range.start, end: range.end } : {}) });
  }

  async delete(key: string): Promise<void> {
    await fs.promises.rm(this.pathOf(key), { force: true });
  }

  async isReachable(): Promise<boolean> {
    try {
      await fs.promises.access(this.tmp, fs.constants.W_OK);
      return true;
    } catch {
      return false;
    }
  }

  close(): void {
    // nothing held open between calls
  }
}
