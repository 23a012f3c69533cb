import type { ChatUsage } from '../../platform/ai/models';
import { promptOfParts } from './prompt';
import type { ReplyWrites } from './reply-writes';
import { addStep, type ChatObserver, type SendOutcome, type Turn } from './turn';

/** About how many characters a token is, for the usage of a model call stopped before its provider reported it. */
const CHARS_PER_TOKEN = 4;

/**
 * The usage of a model call stopped mid-way: a provider reports usage only at the end of a
 * stream, so it is estimated from the request's messages and the text produced.
 */
export function estimatedUsage(turn: Turn, produced: string): ChatUsage {
  const request = JSON.stringify([...turn.prompt, ...promptOfParts(turn.parts)]).length;
  return { inputTokens: Math.ceil(request / CHARS_PER_TOKEN), outputTokens: Math.ceil(produced.length / CHARS_PER_TOKEN) };
}

/**
 * Ends a stopped turn: the text the stopped call produced (`produced`; null when no model call
 * was on its way, e.g. a tool was running) is kept and charged, and the reply is stored `stopped`.
 */
export async function stopTurn(turn: Turn, writes: ReplyWrites, observer: ChatObserver, produced: string | null): Promise<SendOutcome> {
  const step = produced === null ? null : addStep(turn, produced, estimatedUsage(turn, produced), [], observer);
  return { message: turn.message, reply: await writes.stop(turn, step), failure: null, approval: null };
}
