import { Readable } from 'node:stream';
import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { Outputs } from '../../../generated/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Database } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import { toPage } from '../../platform/pagination';
import type { ObjectStore } from '../../platform/storage';
import * as repo from './repository';

export type OutputRow = Selectable<Outputs>;

export interface NewOutput {
  ownerUserId: string;
  type: components['schemas']['OutputType'];
  name: string;
  mimeType: string;
  /** The bytes: a buffer, or a stream of exactly `sizeBytes`. */
  body: Buffer | Readable;
  sizeBytes?: number;
  conversationId?: string | null;
  automationId?: string | null;
}

/** What an OutputService is built from. */
export interface OutputServiceDeps {
  db: Database;
  store: ObjectStore;
  maxBytes: number;
  warn: (message: string, meta: Record<string, unknown>) => void;
}

/** Generated artifacts, stored like files; `create` is for the areas that generate them. */
export class OutputService {
  private readonly db: Database;
  private readonly store: ObjectStore;
  private readonly maxBytes: number;
  private readonly warn: (message: string, meta: Record<string, unknown>) => void;

  constructor({ db, store, maxBytes, warn }: OutputServiceDeps) {
    this.db = db;
    this.store = store;
    this.maxBytes = maxBytes;
    this.warn = warn;
  }

  /** Stores the bytes, then records the output; a failed record leaves no object behind. */
  async create(output: NewOutput): Promise<OutputRow> {
    const size = Buffer.isBuffer(output.body) ? output.body.length : output.sizeBytes;
    if (size === undefined) throw new Error('a streamed output needs its sizeBytes');
    if (size > this.maxBytes) throw errors.payloadTooLarge(`Outputs may be at most ${this.maxBytes} bytes.`);
    const now = new Date();
    const id = uuidv7(now.getTime());
    const key = `outputs/${output.ownerUserId}/${id}`;
    const body = Buffer.isBuffer(output.body) ? Readable.from([output.body]) : output.body;
    const stored = await this.store.put(key, body, { contentType: output.mimeType, size });
    try {
      return await repo.insertOutput(this.db, {
        id,
        owner_user_id: output.ownerUserId,
        type: output.type,
        name: output.name,
        mime_type: output.mimeType,
        size_bytes: stored.size,
        sha256: stored.sha256,
        storage_key: key,
        conversation_id: output.conversationId ?? null,
        automation_id: output.automationId ?? null,
        created_at: now,
      });
    } catch (error) {
      await this.store.delete(key).catch(() => undefined);
      throw error;
    }
  }

  async get(userId: string, outputId: string): Promise<OutputRow> {
    const row = await repo.findOutput(this.db, userId, outputId);
    if (!row) throw errors.notFound('Output not found.');
    return row;
  }

  async list(userId: string, filter: { type?: string; conversationId?: string; automationId?: string }, page: PageRequest) {
    return toPage(await repo.listOutputs(this.db, userId, filter, page), page.limit);
  }

  openObject(key: string, range?: { start: number; end: number }): Promise<Readable> {
    return this.store.get(key, range);
  }

  async delete(userId: string, outputId: string): Promise<void> {
    const row = await repo.deleteOutput(this.db, userId, outputId);
    if (!row) throw errors.notFound('Output not found.');
    try {
      await this.store.delete(row.storage_key);
    } catch (error) {
      this.warn('could not delete a stored object; it is left behind', { key: row.storage_key, error: (error as Error).message });
    }
  }
}
