import { Readable } from 'node:stream';
import type { RequestInput } from '../../platform/api-types';
import { errors } from '../../platform/errors';
import type { PageRequest } from '../../platform/pagination';
import type { Database } from '../../platform/db';
import { sharedProjects } from '../../platform/db/access';
import { isSelfOrAncestor, lockForTransaction } from '../../platform/db/locks';
import { uuidv7 } from '../../platform/ids';
import type { SignedGrant, SignedUrls } from '../../platform/signed-urls';
import { ObjectIncompleteError, type ObjectStore, ObjectTooLargeError } from '../../platform/storage';
import type { EntitlementGuard } from '../billing/service';
import type { ConversationService } from '../conversations/service';
import type { ProjectService } from '../projects/service';
import { type Ingested, ingestedTextOf, ingestFile, readAll } from './ingestion';
import type { FileRow } from './presenter';
import * as repo from './repository';

type CreateInput = RequestInput<'FileCreateRequest'>;
type UpdateInput = RequestInput<'FileUpdateRequest'>;

export interface FileLimits {
  maxUploadBytes: number;
  ingestMaxBytes: number;
}

/** What a FileService is built from. */
export interface FileServiceDeps {
  db: Database;
  store: ObjectStore;
  signedUrls: SignedUrls;
  projects: ProjectService;
  limits: FileLimits;
  warn: (message: string, meta: Record<string, unknown>) => void;
  entitlements: Pick<EntitlementGuard, 'requireStorage'>;
  conversations: Pick<ConversationService, 'requireOwned'>;
}

/**
 * Files: metadata, owner-scoped access (the owner, or users it is shared with, read; only the
 * owner changes), server-mediated upload and content, ingestion and text search.
 */
export class FileService {
  private readonly db: Database;
  private readonly store: ObjectStore;
  private readonly signedUrls: SignedUrls;
  private readonly projects: ProjectService;
  private readonly limits: FileLimits;
  private readonly warn: (message: string, meta: Record<string, unknown>) => void;
  private readonly entitlements: Pick<EntitlementGuard, 'requireStorage'>;
  private readonly conversations: Pick<ConversationService, 'requireOwned'>;

  constructor({ db, store, signedUrls, projects, limits, warn, entitlements, conversations }: FileServiceDeps) {
    this.db = db;
    this.store = store;
    this.signedUrls = signedUrls;
    this.projects = projects;
    this.limits = limits;
    this.warn = warn;
    this.entitlements = entitlements;
    this.conversations = conversations;
  }

  /** A file the caller may read (owner or grantee); 404 otherwise. */
  async get(userId: string, fileId: string): Promise<FileRow> {
    const row = await repo.findReadableFile(this.db, userId, fileId);
    if (!row) throw errors.notFound('File not found.');
    return row;
  }

  /** The owner of a file the caller may read (theirs or shared with them); undefined when they cannot see it. */
  async ownerOf(userId: string, fileId: string): Promise<string | undefined> {
    return (await repo.findReadableFile(this.db, userId, fileId))?.owner_user_id;
  }

  /** A file the caller owns: 404 when they cannot see it, 403 when it is only shared with them. */
  private async owned(userId: string, fileId: string, db: Database = this.db): Promise<FileRow> {
    const row = await repo.findReadableFile(db, userId, fileId);
    if (!row) throw errors.notFound('File not found.');
    if (row.owner_user_id !== userId) throw errors.forbidden('Only the owner can change or share this file.');
    return row;
  }

  private async requireFolder(userId: string, folderId: string, db: Database = this.db): Promise<void> {
    const folder = await repo.findOwnedFile(db, userId, folderId);
    if (!folder || folder.kind !== 'folder') throw errors.referenceNotFound('parentId', 'Folder not found.');
  }

  /** Whether the user has a file whose content is stored (onboarding's `first_file`). */
  hasStoredFile(userId: string): Promise<boolean> {
    return repo.ownsStoredFile(this.db, userId);
  }

  /** The caller's files and those shared with them (per `scope`): granted themselves, or in a shared project. */
  async list(userId: string, filter: repo.FileFilter, page: PageRequest) {
    const shared = filter.scope === 'owned' ? [] : await sharedProjects(this.db, userId);
    return repo.readableFileList.page(this.db, { userId, ...filter, shared }, page);
  }

  /** The users a file (of the caller's) is shared with. */
  granteesOf(fileId: string): Promise<string[]> {
    return repo.granteesOf(this.db, fileId);
  }

  /** A content URL for a ready file, bound to the user who may read it. */
  async contentLink(row: Pick<FileRow, 'id' | 'kind' | 'status'>, userId: string): Promise<{ url: string; expiresAt: number } | null> {
    if (row.kind !== 'file' || row.status !== 'ready') return null;
    const { token, expiresAt } = await this.signedUrls.sign({ userId, fileId: row.id, purpose: 'content' });
    return { url: `/api/v1/files/${encodeURIComponent(row.id)}/content?token=${encodeURIComponent(token)}`, expiresAt };
  }

  async create(userId: string, input: CreateInput): Promise<FileRow> {
    const kind = input.kind ?? 'file';
    if (kind === 'file') {
      const missing = (['mimeType', 'sizeBytes'] as const).filter((field) => input[field] === undefined);
      if (missing.length > 0) {
        throw errors.invalidRequest(
          'A file needs mimeType and sizeBytes.',
          missing.map((f) => ({ path: `/body/${f}`, message: `is required for a file` })),
        );
      }
      if ((input.sizeBytes as number) > this.limits.maxUploadBytes) {
        throw errors.payloadTooLarge(`Files may be at most ${this.limits.maxUploadBytes} bytes.`);
      }
    } else if (input.mimeType !== undefined || input.sizeBytes !== undefined) {
      throw errors.invalidRequest('A folder takes neither mimeType nor sizeBytes.', [
        { path: '/body/kind', message: 'folder has no content' },
      ]);
    }
    await this.projects.requireOwnedIfNamed(userId, input.projectId);
    if (input.parentId !== undefined) await this.requireFolder(userId, input.parentId);
    if (input.conversationId !== undefined) await this.conversations.requireOwned(userId, input.conversationId);
    const now = new Date();
    const row = {
      id: uuidv7(now.getTime()),
      owner_user_id: userId,
      kind,
      name: input.name,
      mime_type: kind === 'file' ? (input.mimeType as string) : null,
      size_bytes: kind === 'file' ? (input.sizeBytes as number) : null,
      status: kind === 'file' ? 'pending' : 'ready',
      project_id: input.projectId ?? null,
      parent_id: input.parentId ?? null,
      conversation_id: input.conversationId ?? null,
      created_at: now,
      updated_at: now,
    };
    if (kind === 'folder') return repo.insertFile(this.db, row);
    // The declared size counts against the plan's storage from now on (the space is reserved).
    return this.db.transaction().execute(async (trx) => {
      await this.entitlements.requireStorage(trx, userId, input.sizeBytes as number);
      return repo.insertFile(trx, row);
    });
  }

  async update(userId: string, input: UpdateInput): Promise<FileRow> {
    return this.db.transaction().execute(async (trx) => {
      await lockForTransaction(trx, `files:${userId}`);
      const file = await this.owned(userId, input.fileId, trx);
      await this.projects.requireOwnedIfNamed(userId, input.projectId, trx);
      if (input.parentId !== undefined && input.parentId !== null) {
        await this.requireFolder(userId, input.parentId, trx);
        if (file.kind === 'folder' && (await isSelfOrAncestor(trx, 'files', input.parentId, file.id))) {
          throw errors.conflict('A folder cannot be moved into itself or a folder inside it.');
        }
      }
      const updated = await repo.updateFile(trx, userId, file.id, {
        name: input.name,
        parent_id: input.parentId,
        project_id: input.projectId,
        updated_at: new Date(),
      });
      if (!updated) throw errors.notFound('File not found.');
      return updated;
    });
  }

  async delete(userId: string, fileId: string): Promise<void> {
    const file = await this.db.transaction().execute(async (trx) => {
      await lockForTransaction(trx, `files:${userId}`);
      const row = await this.owned(userId, fileId, trx);
      if (await repo.hasChildren(trx, fileId)) throw errors.conflict('The folder is not empty: move or delete its files first.');
      await repo.deleteFile(trx, userId, fileId);
      return row;
    });
    if (file.storage_key) await this.deleteObject(file.storage_key);
  }

  async share(userId: string, input: { fileId: string; add?: string[]; remove?: string[] }): Promise<string[]> {
    const add = input.add ?? [];
    if (add.includes(userId)) {
      throw errors.invalidRequest('A file cannot be shared with its owner.', [
        { path: '/body/add', message: 'must not contain the owner' },
      ]);
    }
    await this.db.transaction().execute(async (trx) => {
      await this.owned(userId, input.fileId, trx);
      await repo.addShares(trx, input.fileId, userId, add);
      await repo.removeShares(trx, input.fileId, input.remove ?? []);
    });
    return this.granteesOf(input.fileId);
  }

  async uploadUrl(userId: string, fileId: string) {
    const file = await this.owned(userId, fileId);
    if (file.kind !== 'file') throw errors.conflict('A folder has no content to upload.');
    if (file.status === 'ready') throw errors.conflict('The file is already stored; files cannot be overwritten, create a new one.');
    const signed = await this.signedUrls.sign({
      userId,
      fileId,
      purpose: 'upload',
      size: file.size_bytes as number,
      type: file.mime_type as string,
    });
    await repo.insertUploadToken(this.db, { jti: signed.jti, fileId, userId, expiresAt: new Date(signed.expiresAt) });
    return { ...signed, file };
  }

  /**
   * Streams an upload to the store under a key of its own, then makes it the file's content. More
   * bytes than declared fail as they arrive, fewer at the end; an upload that fails leaves no
   * object and no ready file.
   */
  async receiveUpload(grant: SignedGrant, fileId: string, body: Readable, contentLength: number | undefined): Promise<FileRow> {
    if (grant.purpose !== 'upload' || grant.fileId !== fileId) throw errors.unauthenticated('This URL is not for this upload.');
    const file = await repo.findOwnedFile(this.db, grant.userId, fileId);
    if (!file) throw errors.notFound('File not found.');
    const declared = file.size_bytes as number;
    if (contentLength === undefined) {
      throw errors.invalidRequest('Send the upload with a Content-Length header.', [
        { path: '/headers/content-length', message: 'is required' },
      ]);
    }
    if (contentLength > declared) {
      throw errors.payloadTooLarge(`This upload must be exactly ${declared} bytes.`);
    }
    if (contentLength < declared) {
      throw errors.invalidRequest(`This upload must be exactly ${declared} bytes.`, [
        { path: '/headers/content-length', message: `must be ${declared}` },
      ]);
    }
    if (!(await repo.consumeUploadToken(this.db, grant.jti))) throw errors.linkUsed();
    if (file.status === 'ready') throw errors.conflict('The file is already stored.');

    const key = `files/${file.owner_user_id}/${file.id}/${grant.jti}`;
    await repo.setStatus(this.db, file.id, 'uploading');
    let stored;
    try {
      stored = await this.store.put(key, body, { contentType: file.mime_type as string, size: declared });
    } catch (error) {
      await repo.setStatus(this.db, file.id, 'failed');
      if (error instanceof ObjectTooLargeError) throw errors.payloadTooLarge(`This upload must be exactly ${declared} bytes.`);
      if (error instanceof ObjectIncompleteError) {
        throw errors.invalidRequest(`The upload ended after ${error.received} of ${declared} bytes.`, [
          { path: '/body', message: `must be ${declared} bytes` },
        ]);
      }
      if (body.destroyed && !body.readableEnded) {
        // The client went away mid-upload: an expected event, not a server fault.
        throw errors.invalidRequest('The upload was interrupted; request a new upload URL and send it again.', [
          { path: '/body', message: 'incomplete' },
        ]);
      }
      throw error;
    }
    const ready = await repo.markReady(this.db, file.id, { key, ...stored });
    if (!ready) {
      await this.deleteObject(key);
      throw errors.conflict('Another upload stored this file first.');
    }
    return ready;
  }

  /**
   * The file whose content the caller may read, with its object key. With a content URL's grant,
   * the grant must be for this file, and its user must still be allowed to read it.
   */
  async readable(userId: string, fileId: string, grant?: SignedGrant): Promise<FileRow & { storage_key: string }> {
    if (grant && (grant.purpose !== 'content' || grant.fileId !== fileId)) throw errors.unauthenticated('This URL is not for this file.');
    const file = await repo.findReadableFile(this.db, userId, fileId);
    if (!file || file.status !== 'ready' || !file.storage_key) throw errors.notFound('File not found.');
    return file as FileRow & { storage_key: string };
  }

  openObject(key: string, range?: { start: number; end: number }): Promise<Readable> {
    return this.store.get(key, range);
  }

  /**
   * The content of a ready file the caller owns (a file only shared with them does not count):
   * `404` naming `field` otherwise, `413` when it is larger than `maxBytes`.
   */
  async ownContent(userId: string, fileId: string, maxBytes: number, field = 'fileId'): Promise<{ file: FileRow; bytes: Buffer }> {
    const file = await repo.findOwnedFile(this.db, userId, fileId);
    if (!file || file.kind !== 'file' || file.status !== 'ready' || !file.storage_key)
      throw errors.referenceNotFound(field, 'File not found.');
    if ((file.size_bytes ?? 0) > maxBytes)
      throw errors.payloadTooLarge(`The file is ${file.size_bytes} bytes; at most ${maxBytes} can be used here.`);
    return { file, bytes: await readAll(await this.store.get(file.storage_key)) };
  }

  /**
   * Stores `bytes` as a new ready file of the user's (counted against the storage entitlement,
   * `402 quota_exceeded`), then ingests it. A file that cannot be recorded leaves no object.
   */
  async createIngested(
    userId: string,
    input: { name: string; mimeType: string; bytes: Buffer; projectId: string | null; conversationId: string | null },
  ): Promise<FileRow> {
    const now = new Date();
    const id = uuidv7(now.getTime());
    const key = `files/${userId}/${id}/generated`;
    const stored = await this.store.put(key, Readable.from([input.bytes]), { contentType: input.mimeType, size: input.bytes.length });
    try {
      await this.db.transaction().execute(async (trx) => {
        await this.entitlements.requireStorage(trx, userId, stored.size);
        await repo.insertFile(trx, {
          id,
          owner_user_id: userId,
          kind: 'file',
          name: input.name,
          mime_type: input.mimeType,
          size_bytes: stored.size,
          sha256: stored.sha256,
          storage_key: key,
          status: 'ready',
          project_id: input.projectId,
          parent_id: null,
          conversation_id: input.conversationId,
          created_at: now,
          updated_at: now,
        });
      });
    } catch (error) {
      await this.deleteObject(key);
      throw error;
    }
    await this.ingest(userId, id);
    return this.get(userId, id);
  }

  /** Extracts, chunks and indexes the text of the caller's ready file. */
  async ingest(userId: string, fileId: string): Promise<Ingested> {
    return ingestFile(this.db, this.store, await this.owned(userId, fileId), this.limits.ingestMaxBytes);
  }

  /**
   * The extracted text of a file the caller may read (their own or shared with them), from its
   * ingested chunks, cut at `maxChars`; `409` when the file has not been ingested.
   */
  async ingestedText(userId: string, fileId: string, maxChars: number): Promise<{ file: FileRow; text: string; truncated: boolean }> {
    const file = await this.readable(userId, fileId);
    return { file, ...(await ingestedTextOf(this.db, file, maxChars)) };
  }

  async search(userId: string, query: string, filter: { fileId?: string; projectId?: string }, limit: number) {
    if (filter.fileId !== undefined) await this.get(userId, filter.fileId);
    if (filter.projectId !== undefined) await this.projects.requireOwned(userId, filter.projectId);
    return repo.searchChunks(this.db, userId, query, filter, limit);
  }

  private async deleteObject(key: string): Promise<void> {
    try {
      await this.store.delete(key);
    } catch (error) {
      this.warn('could not delete a stored object; it is left behind', { key, error: (error as Error).message });
    }
  }
}
