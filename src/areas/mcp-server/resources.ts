import type { ReadResourceResult, Resource, ResourceTemplate } from '@modelcontextprotocol/sdk/types.js' with {
  'resolution-mode': 'import',
};
import { ApiError } from '../../platform/errors';
import type { FileService } from '../files/service';
import type { NoteService } from '../notes/service';

/** How many resources a page of resources/list holds. */
const PAGE = 50;
/** The most characters of a file's text a read returns. */
const FILE_MAX_CHARS = 200_000;

const NOTE = /^workspace:\/\/notes\/([^/?#]+)$/;
const FILE = /^workspace:\/\/files\/([^/?#]+)$/;

/** A resource that is not the caller's, a URI not of this server, or a cursor not made here: a JSON-RPC error. */
export class InvalidResourceRequest extends Error {}

/** Where a listing stands: in the notes (then the files), or in the files, below an id. */
interface Position {
  part: 'notes' | 'files';
  beforeId: string | null;
}

const encode = (position: Position) => Buffer.from(JSON.stringify(position), 'utf8').toString('base64url');

function decode(cursor: string): Position {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as Position;
    if ((value.part === 'notes' || value.part === 'files') && (value.beforeId === null || typeof value.beforeId === 'string')) return value;
  } catch {
    // Not a cursor of ours: refused below.
  }
  throw new InvalidResourceRequest('The cursor is not one this server gave.');
}

/** The resource templates the server names (its notes and files by id). */
export const RESOURCE_TEMPLATES: ResourceTemplate[] = [
  {
    name: 'note',
    uriTemplate: 'workspace://notes/{noteId}',
    title: 'A note',
    description: "One of the user's notes (Markdown).",
    mimeType: 'text/markdown',
  },
  {
    name: 'file',
    uriTemplate: 'workspace://files/{fileId}',
    title: 'A file',
    description: "The extracted text of one of the user's ingested files, or of one shared with them.",
    mimeType: 'text/plain',
  },
];

/** The caller's notes and files (their own and those shared with them) as MCP resources, newest first, notes then files. */
export class McpResources {
  constructor(
    private readonly notes: Pick<NoteService, 'list' | 'get'>,
    private readonly files: Pick<FileService, 'list' | 'ingestedText'>,
  ) {}

  async list(userId: string, cursor: string | undefined): Promise<{ resources: Resource[]; nextCursor?: string }> {
    let position: Position = cursor === undefined ? { part: 'notes', beforeId: null } : decode(cursor);
    const resources: Resource[] = [];
    if (position.part === 'notes') {
      const page = await this.notes.list(userId, {}, { limit: PAGE, beforeId: position.beforeId });
      resources.push(
        ...page.items.map((note) => ({
          uri: `workspace://notes/${note.id}`,
          name: note.title || note.id,
          title: note.title,
          mimeType: 'text/markdown',
        })),
      );
      const last = page.items[page.items.length - 1];
      if (page.nextCursor && last) return { resources, nextCursor: encode({ part: 'notes', beforeId: last.id }) };
      position = { part: 'files', beforeId: null };
    }
    const room = PAGE - resources.length;
    if (room === 0) return { resources, nextCursor: encode(position) };
    const page = await this.files.list(userId, { scope: 'all', kind: 'file' }, { limit: room, beforeId: position.beforeId });
    resources.push(
      ...page.items.map((file) => ({
        uri: `workspace://files/${file.id}`,
        name: file.name,
        mimeType: 'text/plain',
        size: Number(file.size_bytes ?? 0),
      })),
    );
    const last = page.items[page.items.length - 1];
    return { resources, ...(page.nextCursor && last ? { nextCursor: encode({ part: 'files', beforeId: last.id }) } : {}) };
  }

  async read(userId: string, uri: string): Promise<ReadResourceResult> {
    const note = NOTE.exec(uri);
    const file = FILE.exec(uri);
    try {
      if (note) {
        const row = await this.notes.get(userId, decodeURIComponent(note[1]!));
        return { contents: [{ uri, mimeType: 'text/markdown', text: row.content }] };
      }
      if (file) {
        const { text } = await this.files.ingestedText(userId, decodeURIComponent(file[1]!), FILE_MAX_CHARS);
        return { contents: [{ uri, mimeType: 'text/plain', text }] };
      }
    } catch (error) {
      // Not the caller's (404), or a file without extracted text (409): the area's message.
      if (error instanceof ApiError && error.status < 500) throw new InvalidResourceRequest(`Resource ${uri}: ${error.message}`);
      throw error;
    }
    throw new InvalidResourceRequest(
      `Resource ${uri} not found: this server's resources are workspace://notes/<id> and workspace://files/<id>.`,
    );
  }
}
