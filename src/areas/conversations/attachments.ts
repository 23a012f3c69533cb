/**
 * Attachments of chat messages: the files a user message comes with (the caller's own, or shared
 * with them), checked before the turn is stored; images given to a `vision` model as image parts,
 * documents as their extracted text in numbered sources the reply cites.
 */
import { buffer } from 'node:stream/consumers';
import { imageSize } from 'image-size';
import type { Grounding, GroundingSource } from '../../platform/ai/grounding';
import type { UserContentPart } from '../../platform/ai/models';
import { ApiError, errors } from '../../platform/errors';
import type { FileService } from '../files/service';
import type { ResolvedModel } from '../models/service';
import { GROUNDING_SOURCES, type TurnGrounding } from './grounding';
import type { StoredCitation } from './presenter';

/** An attachment as a user message stores it (`messages.attachments`) and the API shows it. */
export interface StoredAttachment {
  fileId: string;
  name: string;
  contentType: string;
  sizeBytes: number;
  kind: 'image' | 'document';
  width: number | null;
  height: number | null;
}

type ImagePart = Extract<UserContentPart, { type: 'image' }>;

/** An attached document: its description and the extracted text the model reads. */
interface AttachedDocument {
  stored: StoredAttachment;
  projectId: string | null;
  text: string;
}

/** A message's checked attachments: what is stored, the images for the prompt, the documents' text. */
export interface PreparedAttachments {
  stored: StoredAttachment[];
  images: ImagePart[];
  documents: AttachedDocument[];
}

/** The image types given to models as images (the ones every provider kind takes). */
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
/** The start of a document's text its citation shows. */
const SNIPPET_CHARS = 200;

const baseType = (mimeType: string | null) => (mimeType ?? '').split(';')[0]!.trim().toLowerCase();

export interface AttachmentLimits {
  /** The largest image attached (CHAT_ATTACHMENT_IMAGE_MAX_BYTES). */
  imageMaxBytes: number;
  /** The most characters of documents' text in one message (CHAT_ATTACHMENT_TEXT_MAX_CHARS). */
  textMaxChars: number;
}

export interface AttachmentsDeps {
  files: Pick<FileService, 'get' | 'readable' | 'openObject' | 'ingestedText'>;
  limits: AttachmentLimits;
}

/** Checks and reads the attachments of chat messages, as the caller. */
export class Attachments {
  private readonly files: AttachmentsDeps['files'];
  private readonly limits: AttachmentLimits;

  constructor({ files, limits }: AttachmentsDeps) {
    this.files = files;
    this.limits = limits;
  }

  /**
   * The attachments of a message about to be sent to `model` (null when it has none), read in
   * full; every refusal is thrown before anything is stored: a repeated file or one that is not a
   * readable image `400`, an image for a model without `vision` `400` naming the model, a file the
   * caller cannot read `404`, one not uploaded or not ingested `409`, over the limits `413`.
   */
  async prepare(
    userId: string,
    requested: Array<{ fileId: string }> | undefined,
    model: ResolvedModel,
  ): Promise<PreparedAttachments | null> {
    if (!requested || requested.length === 0) return null;
    const seen = new Set<string>();
    requested.forEach(({ fileId }, i) => {
      if (seen.has(fileId))
        throw errors.invalidRequest(`The file ${fileId} is attached twice.`, [
          { path: `/body/attachments/${i}/fileId`, message: 'must name each file once' },
        ]);
      seen.add(fileId);
    });
    const files = await Promise.all(requested.map(({ fileId }, i) => this.file(userId, fileId, i)));
    const images = files.filter((f) => IMAGE_TYPES.has(baseType(f.mime_type)));
    if (images.length > 0 && !model.kinds.includes('vision')) {
      throw errors.invalidRequest(`The model "${model.info.id}" does not read images; choose a model with the vision kind.`, [
        { path: '/body/attachments', message: `holds an image (${images[0]!.name}) for a model without vision` },
      ]);
    }
    const documents = files.length - images.length;
    if (documents > GROUNDING_SOURCES) {
      throw errors.invalidRequest(`A message may attach at most ${GROUNDING_SOURCES} documents.`, [
        { path: '/body/attachments', message: `holds ${documents} documents` },
      ]);
    }
    const prepared: PreparedAttachments = { stored: [], images: [], documents: [] };
    let chars = this.limits.textMaxChars;
    // In order: documents share one budget of text, spent as the caller listed them.
    for (const [i, file] of files.entries()) {
      const contentType = baseType(file.mime_type);
      const described = { fileId: file.id, name: file.name, contentType, sizeBytes: Number(file.size_bytes ?? 0) };
      if (IMAGE_TYPES.has(contentType)) {
        const image = await this.image(userId, file.id, file.name, contentType, Number(file.size_bytes ?? 0), i);
        prepared.images.push(image.part);
        prepared.stored.push({ ...described, kind: 'image', width: image.width, height: image.height });
      } else {
        const text = await this.documentText(userId, file.id, file.name, chars);
        chars -= text.length;
        const stored: StoredAttachment = { ...described, kind: 'document', width: null, height: null };
        prepared.stored.push(stored);
        // A file shared with the caller is cited without its owner's project, as knowledge search does.
        prepared.documents.push({ stored, projectId: file.owner_user_id === userId ? file.project_id : null, text });
      }
    }
    return prepared;
  }

  /**
   * The image parts of a stored user message's attachments (a continued or regenerated turn),
   * read again as the caller; none for a model without `vision`. An image no longer readable
   * (deleted, unshared) is left out: the turn goes on with what remains.
   */
  async imagesOf(userId: string, stored: unknown, model: ResolvedModel): Promise<ImagePart[]> {
    if (!model.kinds.includes('vision')) return [];
    const images = ((stored ?? []) as StoredAttachment[]).filter((a) => a.kind === 'image');
    const parts = await Promise.all(
      images.map((a, i) =>
        this.image(userId, a.fileId, a.name, a.contentType, a.sizeBytes, i).then(
          (image) => image.part,
          (error: unknown) => {
            if (error instanceof ApiError) return null;
            throw error;
          },
        ),
      ),
    );
    return parts.filter((p): p is ImagePart => p !== null);
  }

  /** A file the caller may read, uploaded: `404` naming it otherwise, `409` while it is not uploaded. */
  private async file(userId: string, fileId: string, i: number) {
    let file: Awaited<ReturnType<AttachmentsDeps['files']['get']>>;
    try {
      file = await this.files.get(userId, fileId);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404)
        throw errors.referenceNotFound(`attachments/${i}/fileId`, `File ${fileId} not found.`);
      throw error;
    }
    if (file.kind !== 'file')
      throw errors.invalidRequest(`"${file.name}" (${fileId}) is a folder; attach files.`, [
        { path: `/body/attachments/${i}/fileId`, message: 'names a folder' },
      ]);
    if (file.status !== 'ready') throw errors.conflict(`The file "${file.name}" (${fileId}) is not uploaded yet (${file.status}).`);
    return file;
  }

  /** An image's bytes as an image part, with its dimensions: `413` over the limit, `400` when it cannot be read as an image. */
  private async image(userId: string, fileId: string, name: string, contentType: string, sizeBytes: number, i: number) {
    if (sizeBytes > this.limits.imageMaxBytes)
      throw errors.payloadTooLarge(
        `The image "${name}" (${fileId}) is ${sizeBytes} bytes; attached images may be at most ${this.limits.imageMaxBytes}.`,
      );
    const file = await this.files.readable(userId, fileId);
    const data = await buffer(await this.files.openObject(file.storage_key));
    let dimensions: { width: number; height: number };
    try {
      dimensions = imageSize(data);
    } catch {
      throw errors.invalidRequest(`The file "${name}" (${fileId}) is not a readable ${contentType} image.`, [
        { path: `/body/attachments/${i}/fileId`, message: 'is not a readable image' },
      ]);
    }
    const part: ImagePart = { type: 'image', data, mediaType: contentType, name };
    return { part, width: dimensions.width, height: dimensions.height };
  }

  /** A document's extracted text: `409` naming it when it has none yet, `413` when it would pass the budget left. */
  private async documentText(userId: string, fileId: string, name: string, budget: number): Promise<string> {
    let read: { text: string; truncated: boolean };
    try {
      read = await this.files.ingestedText(userId, fileId, budget);
    } catch (error) {
      if (error instanceof ApiError && error.status === 409)
        throw errors.conflict(
          `The file "${name}" (${fileId}) has no extracted text yet: ingest it (POST /api/v1/files/ingest-document) first.`,
        );
      throw error;
    }
    if (read.truncated)
      throw errors.payloadTooLarge(
        `The text of "${name}" (${fileId}) takes the message's attached documents past ${this.limits.textMaxChars} characters.`,
      );
    return read.text;
  }
}

/** A user message's content for the prompt: its text, with the images after it. */
export function userContent(text: string, images: ImagePart[] | undefined): string | UserContentPart[] {
  return images && images.length > 0 ? [{ type: 'text', text }, ...images] : text;
}

/**
 * A turn's sources: the attached documents first (numbered from 1), then the knowledge sources
 * of a grounded turn renumbered after them, as many as the citations' limit leaves. Without
 * documents, the grounding as it is.
 */
export function withDocuments(
  grounding: TurnGrounding | null,
  documents: AttachedDocument[],
): { grounding: Grounding | undefined; citations: StoredCitation[] } {
  if (documents.length === 0) return { grounding: grounding?.grounding, citations: grounding?.citations ?? [] };
  const given: GroundingSource[] = documents.map((d, i) => ({
    number: i + 1,
    kind: 'file',
    title: `${d.stored.name} (attached, ${d.stored.contentType}, ${d.stored.sizeBytes} bytes)`,
    text: d.text,
  }));
  const citations: StoredCitation[] = documents.map((d, i) => ({
    number: i + 1,
    sourceType: 'file',
    sourceId: d.stored.fileId,
    title: d.stored.name,
    snippet: d.text.trim().slice(0, SNIPPET_CHARS),
    projectId: d.projectId,
    fileId: d.stored.fileId,
    chunkIndex: null,
    startOffset: null,
    endOffset: null,
  }));
  const room = GROUNDING_SOURCES - documents.length;
  const known = grounding?.grounding.state === 'found' ? grounding.grounding.sources.slice(0, room) : [];
  for (const source of known) given.push({ ...source, number: source.number + documents.length });
  for (const c of (grounding?.citations ?? []).slice(0, known.length)) citations.push({ ...c, number: c.number + documents.length });
  return { grounding: { state: 'found', sources: given }, citations };
}
