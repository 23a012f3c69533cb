/** Search snippets: the database marks matches between « and »; clients also get their offsets. */
const MARKED = /«([^»]*)»/g;

/**
 * The snippet as the search returns it (matches between « and »), with each match's offsets in
 * the snippet once the markers are removed.
 */
export function presentSnippet(marked: string): { snippet: string; highlights: Array<{ start: number; end: number }> } {
  const highlights: Array<{ start: number; end: number }> = [];
  let plain = '';
  let last = 0;
  for (const match of marked.matchAll(MARKED)) {
    plain += marked.slice(last, match.index);
    highlights.push({ start: plain.length, end: plain.length + (match[1] ?? '').length });
    plain += match[1] ?? '';
    last = (match.index ?? 0) + match[0].length;
  }
  return { snippet: marked, highlights };
}
