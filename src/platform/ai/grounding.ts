/**
 * How a grounded chat turn hands the caller's knowledge to a model: a block at the end of the
 * system prompt, written by chat and read back by the development model (which lists the sources
 * it was given, so that grounding is visible and testable offline).
 *
 *     Sources from the user's knowledge for this message. …instruction…
 *     [1] (note) Garden plan
 *     > Plant tomatoes and basil …
 *     [2] (file) travel.md
 *     > …
 *
 * Titles are kept on one line and every line of a passage is quoted (`> `), so a passage can
 * never be read as a source line.
 */

export interface GroundingSource {
  /** The number the reply cites it by (`[1]`). */
  number: number;
  kind: string;
  title: string;
  /** The passage the model reads. */
  text: string;
}

/** What a turn's grounding found: sources, nothing, or the knowledge could not be searched. */
export type Grounding = { state: 'found'; sources: GroundingSource[] } | { state: 'none' } | { state: 'failed' };

const FOUND = "Sources from the user's knowledge for this message.";
const INSTRUCTION =
  'Use them where they help and cite each one you use by its number in square brackets, as [1]. ' +
  'Cite only these sources; if they do not answer the question, say so.';
const NONE =
  "Sources from the user's knowledge for this message: none matched. If the question needs them, say that nothing in the user's files, notes or memory matched.";
const FAILED =
  "Sources from the user's knowledge for this message: unavailable, the knowledge could not be searched. Answer without them and say that you could not consult the user's files and notes.";

const SOURCE_LINE = /^\[(\d+)\] \(([a-z_]+)\) (.*)$/;
const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();

/** The system prompt's grounding block. */
export function groundingBlock(grounding: Grounding): string {
  if (grounding.state === 'none') return NONE;
  if (grounding.state === 'failed') return FAILED;
  const sources = grounding.sources.map((s) => {
    const quoted = s.text
      .trim()
      .split('\n')
      .map((line) => `> ${line}`.trimEnd())
      .join('\n');
    return `[${s.number}] (${s.kind}) ${oneLine(s.title) || '(untitled)'}\n${quoted}`;
  });
  return `${FOUND} ${INSTRUCTION}\n${sources.join('\n')}`;
}

/**
 * The grounding a prompt's system messages carry (the last block), with each source's number and
 * title; null when the prompt is not grounded.
 */
export function groundingIn(
  messages: ReadonlyArray<{ role: string; content: string | readonly unknown[] }>,
): { state: Grounding['state']; sources: Array<{ number: number; title: string }> } | null {
  const system = messages
    .map((m) => (m.role === 'system' && typeof m.content === 'string' ? m.content : null))
    .filter((content) => content !== null)
    .join('\n');
  const at = Math.max(system.lastIndexOf(FOUND), system.lastIndexOf(NONE), system.lastIndexOf(FAILED));
  if (at < 0) return null;
  const block = system.slice(at);
  if (block.startsWith(NONE)) return { state: 'none', sources: [] };
  if (block.startsWith(FAILED)) return { state: 'failed', sources: [] };
  const sources: Array<{ number: number; title: string }> = [];
  for (const line of block.split('\n')) {
    const match = SOURCE_LINE.exec(line);
    if (match) sources.push({ number: Number(match[1]), title: match[3] as string });
  }
  return { state: 'found', sources };
}
