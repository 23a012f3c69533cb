/** Grounded chat turns: which knowledge a turn searches, and the sources it gives the model and cites. */
import type { Grounding } from '../../platform/ai/grounding';
import type { KnowledgeService, KnowledgeWithin } from '../knowledge/service';
import type { SettingsService } from '../settings/service';
import { presentCitations, type StoredCitation } from './presenter';

/** The knowledge sources a grounded turn searches. */
export type KnowledgeSources = Array<'files' | 'memory' | 'notes' | 'projects'>;

/** How a grounded turn went, for the metrics: sources given, none matched, or the search failed. */
export type GroundingOutcome = 'grounded' | 'empty' | 'failed';

/** A grounded turn's sources: what the prompt gives the model and what the reply cites. */
export interface TurnGrounding {
  grounding: Grounding;
  citations: StoredCitation[];
  retrieval: 'hybrid' | 'lexical' | 'failed';
}

/** A grounded turn gives the model at most this many sources… */
export const GROUNDING_SOURCES = 5;
/** …of at most this many characters of passages in all… */
export const GROUNDING_CHARS = 6000;
/** …and this many per source; a source that would get fewer than GROUNDING_MIN_CHARS is left out. */
const GROUNDING_SOURCE_CHARS = 2000;
const GROUNDING_MIN_CHARS = 200;

/** `text` cut to at most `max` characters, at a word where it can, marked with … when cut. */
const cutText = (text: string, max: number) => {
  const trimmed = text.trim();
  if (trimmed.length <= max) return trimmed;
  const head = trimmed.slice(0, max - 1);
  const space = head.lastIndexOf(' ');
  return `${space > max / 2 ? head.slice(0, space) : head}…`;
};

export interface GrounderDeps {
  /** Grounded turns retrieve the caller's knowledge through it. */
  knowledge: Pick<KnowledgeService, 'passages'>;
  /** The caller's `knowledgeInChat` and `memoryInChat`. */
  settings: Pick<SettingsService, 'get'>;
  /** Logs at warn level (a failed knowledge retrieval). */
  warn: (message: string, meta: Record<string, unknown>) => void;
  /** Called once per grounded turn (metrics). */
  onGrounded: (outcome: GroundingOutcome, sources: number) => void;
}

/** Grounds chat turns in the caller's knowledge. */
export class Grounder {
  private readonly knowledge: Pick<KnowledgeService, 'passages'>;
  private readonly settings: Pick<SettingsService, 'get'>;
  private readonly warn: GrounderDeps['warn'];
  private readonly onGrounded: GrounderDeps['onGrounded'];

  constructor({ knowledge, settings, warn, onGrounded }: GrounderDeps) {
    this.knowledge = knowledge;
    this.settings = settings;
    this.warn = warn;
    this.onGrounded = onGrounded;
  }

  /**
   * The knowledge sources a turn is grounded in, or null for an ungrounded turn: the message's
   * `knowledge`, else the caller's `knowledgeInChat`; memory items only while `memoryInChat` is on.
   */
  async sources(userId: string, asked: boolean | undefined): Promise<KnowledgeSources | null> {
    if (asked === false) return null;
    const settings = await this.settings.get(userId);
    if (!(asked ?? settings.knowledgeInChat)) return null;
    return settings.memoryInChat ? ['files', 'memory', 'notes', 'projects'] : ['files', 'notes', 'projects'];
  }

  /**
   * Grounds a turn: the caller's best knowledge results for the message (through the knowledge
   * service, as the caller, so only what they may read), cut to the sources' budget, and stored as
   * the reply's citations; `within` (a skill's knowledge scope) narrows it. A failed search never
   * fails the turn: it goes on without sources, and the prompt says so.
   */
  async ground(
    userId: string,
    replyId: string,
    query: string,
    sources: KnowledgeSources,
    within: KnowledgeWithin | null = null,
  ): Promise<TurnGrounding> {
    let found: Awaited<ReturnType<KnowledgeService['passages']>>;
    try {
      found = await this.knowledge.passages(userId, query, { limit: GROUNDING_SOURCES, sources, within });
    } catch (error) {
      this.warn('knowledge retrieval failed; the chat turn goes on without sources', {
        messageId: replyId,
        error: (error as Error).message,
      });
      this.onGrounded('failed', 0);
      return { grounding: { state: 'failed' }, citations: [], retrieval: 'failed' };
    }
    const citations: StoredCitation[] = [];
    const given: Array<{ number: number; kind: string; title: string; text: string }> = [];
    let budget = GROUNDING_CHARS;
    for (const passage of found.passages) {
      if (budget < GROUNDING_MIN_CHARS) break;
      const text = cutText(passage.text, Math.min(GROUNDING_SOURCE_CHARS, budget));
      budget -= text.length;
      const number = citations.length + 1;
      given.push({ number, kind: passage.kind, title: passage.title, text });
      citations.push({
        number,
        sourceType: passage.kind,
        sourceId: passage.id,
        title: passage.title,
        snippet: passage.snippet,
        projectId: passage.projectId,
        fileId: passage.fileId,
        chunkIndex: passage.chunkIndex,
        startOffset: passage.startOffset,
        endOffset: passage.endOffset,
      });
    }
    this.onGrounded(citations.length > 0 ? 'grounded' : 'empty', citations.length);
    return {
      grounding: citations.length > 0 ? { state: 'found', sources: given } : { state: 'none' },
      citations,
      retrieval: found.retrieval,
    };
  }
}

/**
 * The sources a continued turn keeps, from its reply's stored citations (none: undefined): their
 * snippets stand for the passages, which are not stored, so the turn cites the same numbers.
 */
export function groundingOfCitations(stored: unknown): Grounding | undefined {
  const cited = presentCitations(stored);
  return cited.length > 0
    ? { state: 'found', sources: cited.map((c) => ({ number: c.number, kind: c.sourceType, title: c.title, text: c.snippet })) }
    : undefined;
}
