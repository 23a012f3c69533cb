import { errors } from '../platform/errors';
import { DEFAULT_LIMIT, decodeCursor, type PageRequest } from '../platform/pagination';

/** Reads `limit` and `cursor` (already validated against the document) into a page request. */
export function readPage(query: { limit?: number; cursor?: string }): PageRequest {
  const limit = query.limit ?? DEFAULT_LIMIT;
  if (query.cursor === undefined) return { limit, beforeId: null };
  const beforeId = decodeCursor(query.cursor);
  if (beforeId === null) {
    throw errors.invalidRequest('The cursor is not valid.', [
      { path: '/query/cursor', message: 'must be a nextCursor returned by this operation' },
    ]);
  }
  return { limit, beforeId };
}
