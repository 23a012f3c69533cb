import { createHash } from 'node:crypto';
import type { Selectable } from 'kysely';
import type { RequestInput } from '../../platform/api-types';
import type { MemoryItems } from '../../../generated/db';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import { type Database, PgError, pgErrorCode } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import { toPage } from '../../platform/pagination';
import type { ProjectService } from '../projects/service';
import * as repo from './repository';

type CreateInput = RequestInput<'MemoryCreateRequest'>;
type UpdateInput = RequestInput<'MemoryUpdateRequest'>;
export type MemoryRow = Selectable<MemoryItems>;

/** Two items are the same memory when their content is equal after NFKC, case folding and white-space collapsing. */
export function normalizeMemoryContent(content: string): string {
  return content.normalize('NFKC').toLowerCase().replace(/\s+/gu, ' ').trim();
}

const contentKey = (content: string) => createHash('sha256').update(normalizeMemoryContent(content)).digest('hex');

export class MemoryService {
  constructor(
    private readonly db: Database,
    private readonly projects: ProjectService,
  ) {}

  async get(userId: string, memoryId: string): Promise<MemoryRow> {
    const row = await repo.findMemoryItem(this.db, userId, memoryId);
    if (!row) throw errors.notFound('Memory item not found.');
    return row;
  }

  /**
   * The user's items sharing the most words with `text`, global ones and those of `projectId`: what
   * the assistant is told about the user for a message.
   */
  relevant(userId: string, projectId: string | null, text: string, limit: number): Promise<Array<{ id: string; content: string }>> {
    return repo.relevantMemoryItems(this.db, userId, projectId, text, limit);
  }

  async list(userId: string, filter: { kind?: string; projectId?: string }, page: PageRequest) {
    return toPage(await repo.listMemoryItems(this.db, userId, filter, page), page.limit);
  }

  /** Stores the item, or returns the caller's existing item with the same normalized content. */
  async create(userId: string, input: CreateInput): Promise<{ item: MemoryRow; created: boolean }> {
    const key = contentKey(input.content);
    const existing = await repo.findMemoryItemByContentKey(this.db, userId, key);
    if (existing) return { item: existing, created: false };
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    const now = new Date();
    const inserted = await repo.insertMemoryItem(this.db, {
      id: uuidv7(now.getTime()),
      owner_user_id: userId,
      project_id: input.projectId ?? null,
      kind: input.kind,
      content: input.content,
      content_key: key,
      source: input.source ?? 'user',
      source_ref: input.sourceRef ?? null,
      created_at: now,
      updated_at: now,
    });
    if (inserted) return { item: inserted, created: true };
    // A concurrent create of the same content won the race.
    const winner = await repo.findMemoryItemByContentKey(this.db, userId, key);
    if (!winner) throw new Error('memory insert returned nothing without a content conflict');
    return { item: winner, created: false };
  }

  async update(userId: string, input: UpdateInput): Promise<MemoryRow> {
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    try {
      const updated = await repo.updateMemoryItem(this.db, userId, input.memoryId, {
        kind: input.kind,
        content: input.content,
        content_key: input.content === undefined ? undefined : contentKey(input.content),
        project_id: input.projectId,
        updated_at: new Date(),
      });
      if (!updated) throw errors.notFound('Memory item not found.');
      return updated;
    } catch (error) {
      if (pgErrorCode(error) === PgError.uniqueViolation) {
        throw errors.conflict('Another memory item already has this content.');
      }
      throw error;
    }
  }

  async delete(userId: string, memoryId: string): Promise<void> {
    if (!(await repo.deleteMemoryItem(this.db, userId, memoryId))) throw errors.notFound('Memory item not found.');
  }
}
