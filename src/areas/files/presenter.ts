import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { Files } from '../../../generated/db';
import { millis } from '../../platform/db/timestamps';
import { presentSnippet } from '../../platform/snippet';
import type { ChunkMatch, FileView } from './repository';

type Schemas = components['schemas'];
export type FileRow = Selectable<Files>;

export interface ContentLink {
  url: string;
  expiresAt: number;
}

/** The file as `viewerUserId` sees it: `access` and `sharedWith` depend on whether they own it. */
export function presentFile(row: FileView, viewerUserId: string, sharedWith: string[], contentLink: ContentLink | null): Schemas['File'] {
  const access = row.owner_user_id === viewerUserId ? 'owner' : 'shared';
  return {
    fileId: row.id,
    ownerUserId: row.owner_user_id,
    access,
    kind: row.kind as Schemas['FileKind'],
    name: row.name,
    mimeType: row.mime_type,
    sizeBytes: row.size_bytes,
    status: row.status as Schemas['FileStatus'],
    sha256: row.sha256,
    projectId: row.project_id,
    parentId: row.parent_id,
    conversationId: row.conversation_id,
    ingestion: {
      status: row.ingest_status as Schemas['IngestionStatus'],
      progress: row.ingest_progress,
      chunkCount: row.chunk_count,
      error: row.ingest_error,
    },
    sharedWith: access === 'owner' ? sharedWith : [],
    contentUrl: contentLink?.url ?? null,
    contentUrlExpiresAt: contentLink?.expiresAt ?? null,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}

/** Where and how to send a file's bytes. `origin` is the service's own scheme, host and port. */
export function presentUpload(origin: string, file: FileRow, token: string, expiresAt: number): Schemas['UploadUrlResponse']['upload'] {
  return {
    url: `${origin}/api/v1/files/${encodeURIComponent(file.id)}/upload?token=${encodeURIComponent(token)}`,
    method: 'PUT',
    headers: { 'Content-Type': file.mime_type as string },
    expiresAt,
    maxBytes: file.size_bytes as number,
  };
}

export function presentTextMatch(match: ChunkMatch): Schemas['SearchTextResponse']['results'][number] {
  return {
    fileId: match.file_id,
    fileName: match.name,
    chunkIndex: match.seq,
    startOffset: match.start_offset,
    endOffset: match.end_offset,
    score: Number(match.score),
    ...presentSnippet(match.snippet),
  };
}
