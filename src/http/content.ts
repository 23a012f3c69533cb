import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { errors } from '../platform/errors';
import { noneMatch, STREAMED } from './handler';

/** Types a browser would run (script, markup): always downloaded, never rendered in our origin. */
const ACTIVE_TYPE =
  /^(text\/html|application\/xhtml\+xml|image\/svg\+xml|application\/xml|text\/xml|text\/javascript|application\/javascript|application\/[\w.-]+\+xml)$/i;

export interface StoredContent {
  name: string;
  mimeType: string;
  size: number;
  sha256: string;
  open: (range?: { start: number; end: number }) => Promise<Readable>;
}

function contentDisposition(kind: 'attachment' | 'inline', name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

type RangeAnswer = { kind: 'whole' } | { kind: 'part'; start: number; end: number } | { kind: 'unsatisfiable' };

const WHOLE: RangeAnswer = { kind: 'whole' };
const INT_RANGE = /^(\d+)-(\d*)$/;
const SUFFIX_RANGE = /^-(\d+)$/;

/**
 * Reads a `Range` header against `size` bytes as RFC 9110 §14 asks: another unit or an invalid
 * range set (syntax, or a last position before the first) is ignored; a suffix longer than the
 * content is the whole content; nothing satisfiable is a 416; ranges that do not merge into one
 * are answered with the whole content (no multipart answers). An empty content has no byte a 206
 * could carry: it is always sent whole (a server may ignore Range).
 */
function byteRange(header: string, size: number): RangeAnswer {
  if (size === 0) return WHOLE;
  const equals = header.indexOf('=');
  if (equals < 0 || header.slice(0, equals).trim().toLowerCase() !== 'bytes') return WHOLE;
  const specs = header
    .slice(equals + 1)
    .split(',')
    .map((spec) => spec.trim())
    .filter((spec) => spec !== '');
  if (specs.length === 0) return WHOLE;
  const satisfiable: { start: number; end: number }[] = [];
  for (const spec of specs) {
    const int = INT_RANGE.exec(spec);
    if (int) {
      const first = Number(int[1]);
      const last = int[2] === '' ? Infinity : Number(int[2]);
      if (last < first) return WHOLE;
      if (first < size) satisfiable.push({ start: first, end: Math.min(last, size - 1) });
      continue;
    }
    const suffix = SUFFIX_RANGE.exec(spec);
    if (!suffix) return WHOLE;
    const length = Number(suffix[1]);
    if (length > 0) satisfiable.push({ start: Math.max(0, size - length), end: size - 1 });
  }
  if (satisfiable.length === 0) return { kind: 'unsatisfiable' };
  satisfiable.sort((a, b) => a.start - b.start);
  const first = satisfiable[0] as { start: number; end: number };
  let end = first.end;
  for (const range of satisfiable.slice(1)) {
    if (range.start > end + 1) return WHOLE;
    end = Math.max(end, range.end);
  }
  return { kind: 'part', start: first.start, end };
}

/**
 * Whether `If-Range` lets a range be served (RFC 9110 §13.1.5): only the current ETag itself,
 * compared strongly, so a weak tag never matches; a date never does, since no Last-Modified is sent.
 */
const ifRangeHolds = (ifRange: string | undefined, etag: string) => ifRange === undefined || ifRange.trim() === etag;

/**
 * Streams stored bytes the way every content route does: ETag and If-None-Match, one `bytes`
 * Range on GET (206; 416 when none of it is in the content) guarded by If-Range, nosniff, a
 * sandboxing CSP, and `attachment` for active types.
 */
export async function sendContent(req: Request, res: Response, content: StoredContent): Promise<typeof STREAMED> {
  const etag = `"${content.sha256}"`;
  const base = (content.mimeType.split(';')[0] ?? '').trim();
  res.setHeader('ETag', etag);
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Content-Security-Policy', "default-src 'none'; sandbox");
  res.setHeader('Cache-Control', 'private, no-cache');
  res.setHeader('Content-Disposition', contentDisposition(ACTIVE_TYPE.test(base) ? 'attachment' : 'inline', content.name));
  if (noneMatch(req.get('if-none-match'), etag)) {
    res.status(304).end();
    return STREAMED;
  }

  let range: { start: number; end: number } | undefined;
  const header = req.get('range');
  // Ranges are defined for GET only (RFC 9110 §14.2); HEAD describes the whole content.
  if (header !== undefined && req.method === 'GET' && ifRangeHolds(req.get('if-range'), etag)) {
    const answer = byteRange(header, content.size);
    if (answer.kind === 'unsatisfiable') throw errors.rangeNotSatisfiable(content.size);
    if (answer.kind === 'part') range = { start: answer.start, end: answer.end };
  }
  const stream = await content.open(range);
  res.status(range ? 206 : 200);
  res.type(content.mimeType);
  res.setHeader('Content-Length', String(range ? range.end - range.start + 1 : content.size));
  if (range) res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${content.size}`);
  if (req.method === 'HEAD') {
    stream.destroy();
    res.end();
    return STREAMED;
  }
  try {
    await pipeline(stream, res);
  } catch (error) {
    // The client went away mid-stream: nothing to answer, nothing to report.
    if (!res.destroyed && (error as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') throw error;
  }
  return STREAMED;
}
