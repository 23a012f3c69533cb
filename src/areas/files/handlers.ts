import { sendContent } from '../../http/content';
import { type HandlerMap, idFromQueryOrBody } from '../../http/handler';
import { readPage } from '../../http/pagination';
import { type FileRow, presentFile, presentTextMatch, presentUpload } from './presenter';
import type { FileService } from './service';

export function fileHandlers(
  files: FileService,
): Pick<
  HandlerMap,
  | 'getFiles'
  | 'createFile'
  | 'updateFile'
  | 'deleteFile'
  | 'createFileUploadUrl'
  | 'uploadFileContent'
  | 'getFileContent'
  | 'shareFiles'
  | 'ingestDocument'
  | 'searchFileText'
> {
  /** A file for `userId`: its grantees in the owner's view, a content URL when it is ready. (A page's rows carry their grantees.) */
  const presentOne = async (row: FileRow, userId: string) => {
    const sharedWith = row.owner_user_id === userId ? await files.granteesOf(row.id) : [];
    return presentFile(row, userId, sharedWith, await files.contentLink(row, userId));
  };

  return {
    getFiles: async ({ caller, query }) => {
      if (query.fileId !== undefined) return { file: await presentOne(await files.get(caller.userId, query.fileId), caller.userId) };
      const filter = {
        scope: query.scope ?? 'all',
        projectId: query.projectId,
        parentId: query.parentId,
        kind: query.kind,
        status: query.status,
        conversationId: query.conversationId,
      };
      const page = await files.list(caller.userId, filter, readPage(query));
      const links = await Promise.all(page.items.map((row) => files.contentLink(row, caller.userId)));
      return {
        files: page.items.map((row, i) => presentFile(row, caller.userId, row.shared_with, links[i] ?? null)),
        nextCursor: page.nextCursor,
      };
    },
    createFile: async ({ caller, body }) => ({ file: await presentOne(await files.create(caller.userId, body), caller.userId) }),
    updateFile: async ({ caller, body }) => ({ file: await presentOne(await files.update(caller.userId, body), caller.userId) }),
    deleteFile: async ({ caller, query, body }) => {
      const fileId = idFromQueryOrBody('fileId', query, body);
      await files.delete(caller.userId, fileId);
      return { fileId, deleted: true };
    },
    createFileUploadUrl: async ({ caller, body, req }) => {
      const { token, expiresAt, file } = await files.uploadUrl(caller.userId, body.fileId);
      return { upload: presentUpload(`${req.protocol}://${req.get('host')}`, file, token, expiresAt) };
    },
    uploadFileContent: async ({ caller, params, req }) => {
      const length = req.get('content-length');
      const file = await files.receiveUpload(caller.grant!, params.fileId, req, length === undefined ? undefined : Number(length));
      return { file: await presentOne(file, caller.userId) };
    },
    getFileContent: async ({ caller, params, req, res }) => {
      const file = await files.readable(caller.userId, params.fileId, caller.grant);
      return sendContent(req, res, {
        name: file.name,
        mimeType: file.mime_type as string,
        size: file.size_bytes as number,
        sha256: file.sha256 as string,
        open: (range) => files.openObject(file.storage_key, range),
      });
    },
    shareFiles: async ({ caller, body }) => ({ fileId: body.fileId, sharedWith: await files.share(caller.userId, body) }),
    ingestDocument: async ({ caller, body }) => ({
      ingestion: { fileId: body.fileId, ...(await files.ingest(caller.userId, body.fileId)) },
    }),
    searchFileText: async ({ caller, body }) => {
      const matches = await files.search(caller.userId, body.query, { fileId: body.fileId, projectId: body.projectId }, body.limit ?? 20);
      return { results: matches.map(presentTextMatch) };
    },
  };
}
