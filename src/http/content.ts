import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import parseRange from 'range-parser';
import { errors } from './errors';
import { STREAMED } from './handler';

/** Types a browser would run (script, markup): always downloaded, never rendered in our origin. */
const ACTIVE_TYPE = /^(text\/html|application\/xhtml\+xml|image\/svg\+xml|application\/xml|text\/xml|text\/javascript|application\/javascript|application\/[\w.-]+\+xml)$/i;

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

/**
 * Streams stored bytes the way every content route does: ETag and If-None-Match, one Range (206;
 * 416 outside the content), nosniff, a sandboxing CSP, and `attachment` for active types.
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
  const ifNoneMatch = req.get('if-none-match');
  if (ifNoneMatch && ifNoneMatch.split(',').some((tag) => tag.trim() === etag || tag.trim() === '*')) {
    res.status(304).end();
    return STREAMED;
  }

  let range: { start: number; end: number } | undefined;
  const header = req.get('range');
  if (header && content.size > 0) {
    const ranges = parseRange(content.size, header, { combine: true });
    if (ranges === -1) {
      throw errors.rangeNotSatisfiable(content.size);
    }
    // A malformed header (-2) or several ranges: the whole content, as HTTP allows.
    if (ranges !== -2 && ranges.length === 1) range = ranges[0];
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
