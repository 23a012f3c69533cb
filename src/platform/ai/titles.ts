/**
 * The instruction that asks a chat model for a conversation's title: the first words of the system
 * message of a title request (the user's first message follows as the user message).
 */
export const TITLE_INSTRUCTION =
  'Write a short title (at most six words) for the conversation that starts with the user message below, in its language. Answer with the title alone, on one line, without quotes.';

/** The development model's answer to a title request: the first six words of the user's message, without a trailing stop. */
export function developmentTitle(message: string): string {
  return message
    .split(/\s+/)
    .filter((w) => w !== '')
    .slice(0, 6)
    .join(' ')
    .replace(/[.!?:;,]+$/, '');
}
