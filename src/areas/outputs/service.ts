import { Readable } from 'node:stream';
import type { Selectable, Transaction } from 'kysely';
import type { components } from '../../../generated/api';
import type { Outputs } from '../../../generated/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Database, DB } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import type { ObjectStore } from '../../platform/storage';
import type { EntitlementGuard } from '../billing/service';
import * as repo from './repository';

export type OutputRow = Selectable<Outputs>;

/** Outputs as the API shows them, for the areas that answer with the outputs they made (media). */
export { presentOutput } from './presenter';

export type OutputOrigin = components['schemas']['OutputOrigin'];

/** A generated media file to store as an output, with what made it. */
export interface GeneratedOutput {
  type: components['schemas']['OutputType'];
  name: string;
  mimeType: string;
  body: Buffer;
  origin: Exclude<OutputOrigin, 'automation'>;
  generationId: string;
  prompt: string | null;
  model: string;
  connectionId: string | null;
  sourceFileId: string | null;
  projectId: string | null;
  conversationId: string | null;
}

export interface OutputFilter {
  type?: string;
  origin?: string;
  conversationId?: string;
  automationId?: string;
  projectId?: string;
  generationId?: string;
}

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
  /** The plan's storage entitlement, which generated media counts against. */
  entitlements?: Pick<EntitlementGuard, 'requireStorage'>;
}

/** Generated artifacts, stored like files; `create` is for the areas that generate them. */
export class OutputService {
  private readonly db: Database;
  private readonly store: ObjectStore;
  private readonly maxBytes: number;
  private readonly warn: (message: string, meta: Record<string, unknown>) => void;
  private readonly entitlements: Pick<EntitlementGuard, 'requireStorage'> | null;

  constructor({ db, store, maxBytes, warn, entitlements }: OutputServiceDeps) {
    this.db = db;
    this.store = store;
    this.maxBytes = maxBytes;
    this.warn = warn;
    this.entitlements = entitlements ?? null;
  }

  /** `402 quota_exceeded` when the user's storage has no room left at all (checked before generating). */
  async requireRoom(userId: string): Promise<void> {
    const entitlements = this.entitlements;
    if (entitlements) await this.db.transaction().execute((trx) => entitlements.requireStorage(trx, userId, 1));
  }

  /**
   * Stores generated media: the bytes first, then in one transaction the storage entitlement's
   * check (`402 quota_exceeded`), the records and `then` (the charge and the event). When any step
   * fails, no object and no record is left and nothing `then` wrote is kept. `alsoBytes` more
   * (what the caller stores next, such as a file of the same content) must fit as well.
   */
  async createGenerated<T>(
    ownerUserId: string,
    outputs: GeneratedOutput[],
    then: (trx: Transaction<DB>, rows: OutputRow[]) => Promise<T>,
    alsoBytes = 0,
  ): Promise<{ rows: OutputRow[]; result: T }> {
    for (const output of outputs) {
      if (output.body.length > this.maxBytes)
        throw errors.payloadTooLarge(`Outputs may be at most ${this.maxBytes} bytes; the model returned ${output.body.length}.`);
    }
    const now = new Date();
    const stored: Array<{ output: GeneratedOutput; id: string; key: string; size: number; sha256: string }> = [];
    const removeStored = () => Promise.all(stored.map(({ key }) => this.store.delete(key).catch(() => undefined)));
    try {
      for (const output of outputs) {
        const id = uuidv7(now.getTime());
        const key = `outputs/${ownerUserId}/${id}`;
        const object = await this.store.put(key, Readable.from([output.body]), { contentType: output.mimeType, size: output.body.length });
        stored.push({ output, id, key, size: object.size, sha256: object.sha256 });
      }
      return await this.db.transaction().execute(async (trx) => {
        await this.entitlements?.requireStorage(
          trx,
          ownerUserId,
          stored.reduce((sum, s) => sum + s.size, alsoBytes),
        );
        const rows: OutputRow[] = [];
        for (const { output, id, key, size, sha256 } of stored) {
          rows.push(
            await repo.insertOutput(trx, {
              id,
              owner_user_id: ownerUserId,
              type: output.type,
              name: output.name,
              mime_type: output.mimeType,
              size_bytes: size,
              sha256,
              storage_key: key,
              conversation_id: output.conversationId,
              automation_id: null,
              origin: output.origin,
              generation_id: output.generationId,
              project_id: output.projectId,
              prompt: output.prompt,
              model: output.model,
              connection_id: output.connectionId,
              source_file_id: output.sourceFileId,
              created_at: now,
            }),
          );
        }
        return { rows, result: await then(trx, rows) };
      });
    } catch (error) {
      await removeStored();
      throw error;
    }
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

  async list(userId: string, filter: OutputFilter, page: PageRequest) {
    return repo.outputList.page(this.db, { ownerUserId: userId, ...filter }, page);
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
