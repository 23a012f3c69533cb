import type { Readable } from 'node:stream';
import { errors } from '../../platform/errors';
import type { Database } from '../../platform/db';
import type { ObjectStore } from '../../platform/storage';
import { baseType, canExtract, chunkText, extractText } from './extract';
import type { FileRow } from './presenter';
import * as repo from './repository';

/** Chunks written per statement while a file is ingested. */
const INSERT_BATCH = 200;
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export interface Ingested {
  status: 'ready';
  chunkCount: number;
  characters: number;
}

/**
 * Extracts, chunks and indexes the text of a ready file, recording its progress; a file larger
 * than `maxBytes` is refused. A new generation of chunks replaces the last one only when complete.
 */
export async function ingestFile(db: Database, store: ObjectStore, file: FileRow, maxBytes: number): Promise<Ingested> {
  if (file.kind !== 'file' || file.status !== 'ready' || !file.storage_key)
    throw errors.conflict('Only an uploaded (ready) file can be ingested.');
  if (!canExtract(file.mime_type)) {
    throw errors.unsupportedMediaType(
      `Files of type ${file.mime_type} cannot be ingested (plain text, Markdown, HTML, JSON, CSV and PDF can).`,
    );
  }
  if ((file.size_bytes as number) > maxBytes) {
    throw errors.payloadTooLarge(`Documents over ${maxBytes} bytes cannot be ingested.`);
  }
  const fileId = file.id;
  const generation = await repo.beginIngestion(db, fileId);
  try {
    const bytes = await readAll(await store.get(file.storage_key));
    const text = await extractText(baseType(file.mime_type as string), bytes);
    const chunks = chunkText(text);
    for (let i = 0; i < chunks.length; i += INSERT_BATCH) {
      const batch = chunks.slice(i, i + INSERT_BATCH).map((c, j) => ({ fileId, generation, seq: i + j, ...c }));
      await repo.insertChunks(db, batch);
      await repo.setIngestProgress(db, fileId, Math.min(1, (i + batch.length) / chunks.length));
      await yieldToEventLoop();
    }
    await repo.finishIngestion(db, fileId, generation, chunks.length);
    return { status: 'ready', chunkCount: chunks.length, characters: text.length };
  } catch (error) {
    await repo.failIngestion(db, fileId, generation, error instanceof Error ? error.message : String(error));
    throw error;
  }
}

/** A file's extracted text, put together from its ingested chunks and cut at `maxChars`; `409` when it has not been ingested. */
export async function ingestedTextOf(db: Database, file: FileRow, maxChars: number): Promise<{ text: string; truncated: boolean }> {
  if (file.ingest_status !== 'ready' || file.chunk_count === null || file.chunk_count === 0) {
    throw errors.conflict('The file has not been ingested: ingest it (POST /api/v1/files/ingest) to read its text.');
  }
  let text = '';
  for (const chunk of await repo.currentChunks(db, file.id, file.chunk_generation)) {
    // Chunks may overlap: each adds what lies past the text so far.
    if (chunk.start_offset + chunk.content.length > text.length) text += chunk.content.slice(Math.max(0, text.length - chunk.start_offset));
    if (text.length > maxChars) break;
  }
  return { text: text.slice(0, maxChars), truncated: text.length > maxChars };
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts);
}
