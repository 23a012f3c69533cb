/** The media types whose text can be extracted, by their base type. */
const EXTRACTORS: Record<string, (bytes: Buffer) => Promise<string>> = {
  'text/plain': async (bytes) => bytes.toString('utf8'),
  'text/markdown': async (bytes) => bytes.toString('utf8'),
  'text/x-markdown': async (bytes) => bytes.toString('utf8'),
  'text/csv': async (bytes) => bytes.toString('utf8'),
  'application/json': async (bytes) => bytes.toString('utf8'),
  'text/html': async (bytes) => {
    const { convert } = await import('html-to-text');
    return convert(bytes.toString('utf8'), { wordwrap: false, selectors: [{ selector: 'img', format: 'skip' }] });
  },
  'application/pdf': extractPdf,
};

export function canExtract(mimeType: string | null): boolean {
  return mimeType !== null && baseType(mimeType) in EXTRACTORS;
}

export const baseType = (mimeType: string) => (mimeType.split(';')[0] ?? '').trim().toLowerCase();

export async function extractText(mimeType: string, bytes: Buffer): Promise<string> {
  const extractor = EXTRACTORS[baseType(mimeType)];
  if (!extractor) throw new Error(`no extractor for ${mimeType}`);
  return (await extractor(bytes)).replace(/\r\n?/g, '\n');
}

/** PDF text, page by page (pdf.js yields to the event loop between pages). */
async function extractPdf(bytes: Buffer): Promise<string> {
  const { PDFParse } = await import('pdf-parse');
  const parser = new PDFParse({ data: new Uint8Array(bytes) });
  try {
    const result = await parser.getText({ pageJoiner: '' });
    return result.pages.map((page) => page.text.trim()).join('\n\n');
  } finally {
    await parser.destroy();
  }
}

export interface Chunk {
  start: number;
  end: number;
  content: string;
}

/**
 * Splits text into chunks of about `size` characters, ending at a paragraph, sentence or word
 * boundary when one is near, each with its offsets in the text.
 */
export function chunkText(text: string, size = 1200): Chunk[] {
  const chunks: Chunk[] = [];
  let start = 0;
  while (start < text.length) {
    while (start < text.length && /\s/.test(text[start] as string)) start += 1;
    if (start >= text.length) break;
    let end = Math.min(start + size, text.length);
    if (end < text.length) {
      const window = text.slice(start + Math.floor(size / 2), end);
      const boundary = Math.max(window.lastIndexOf('\n\n'), window.lastIndexOf('. '), window.lastIndexOf('\n'));
      const cut = boundary >= 0 ? boundary + 1 : window.lastIndexOf(' ');
      if (cut > 0) end = start + Math.floor(size / 2) + cut;
    }
    const content = text.slice(start, end).trimEnd();
    if (content.length > 0) chunks.push({ start, end: start + content.length, content });
    start = end;
  }
  return chunks;
}
