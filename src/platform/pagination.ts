/** One page of a collection: how many records and where the previous page ended. */
export interface PageRequest {
  limit: number;
  /** Only records with an id below this one (the previous page's last id). */
  beforeId: string | null;
}

export const DEFAULT_LIMIT = 50;

/** Opaque page cursors: the base64url form of the last id of the previous page. */
export function encodeCursor(lastId: string): string {
  return Buffer.from(lastId, 'utf8').toString('base64url');
}

/** The id inside a cursor, or null when the cursor was not made by this service. */
export function decodeCursor(cursor: string): string | null {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  return /^[0-9a-f-]{1,200}$/.test(id) ? id : null;
}

/** Turns the `limit + 1` rows a list query fetched into a page and its next cursor. */
export function toPage<T extends { id: string }>(rows: T[], limit: number): { items: T[]; nextCursor: string | null } {
  if (rows.length <= limit) return { items: rows, nextCursor: null };
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return { items, nextCursor: last ? encodeCursor(last.id) : null };
}
