import { setImmediate as nextTurn } from 'node:timers/promises';
import { DevelopmentMediaModels } from './development-media';
import { imageSize } from 'image-size';
import { groundingIn } from './grounding';
import { developmentTitle, TITLE_INSTRUCTION } from './titles';
import type { MediaModels } from './media';
import {
  type ChatMessage,
  type ChatPart,
  type ChatRequest,
  type ChatResult,
  type ModelInfo,
  type ModelProvider,
  type ProviderInfo,
  textOf,
  type UserContentPart,
} from './models';

export const DEVELOPMENT_MODEL = 'development';

const words = (text: string) => text.split(/\s+/).filter((w) => w !== '').length;

/** A line `/tool <name> <json arguments>` of a user message: what the development model calls. */
const TOOL_LINE = /^\/tool\s+([a-zA-Z0-9_-]{1,64})(?:\s+(.*))?$/;

/** The arguments of a `/tool` line: its JSON (`{}` when absent), or the text when it is not JSON. */
function lineArguments(text: string | undefined): unknown {
  if (text === undefined || text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** What the development model says of the images a message gave it: name, type, bytes, width × height. */
function describeImages(content: string | UserContentPart[]): string {
  if (typeof content === 'string') return '';
  const images = content.filter((p) => p.type === 'image');
  if (images.length === 0) return '';
  const described = images.map((image) => {
    let dimensions = 'unreadable dimensions';
    try {
      const { width, height } = imageSize(image.data);
      dimensions = `${width} × ${height}`;
    } catch {
      // Described as unreadable: the model says what it got, even a broken image.
    }
    return `${image.name} (${image.mediaType}, ${image.data.byteLength} bytes, ${dimensions})`;
  });
  return `\n\nImages: ${described.join('; ')}`;
}

/**
 * The built-in development provider, used when no provider is configured: deterministic, free
 * and not an AI. Its reply quotes the last user message, so that chat can be developed and tested
 * without a model; token counts are word counts.
 *
 * Tools, deterministically: offered tools (and a tool choice other than `none`), when the last
 * message is the user's and has lines `/tool <name> <json arguments>`, it calls those tools (ids
 * `call_<n>`, counted over the prompt), with no text; when the last messages are tool results, it
 * answers quoting each result. Settings: its reply stops before the first stop sequence, and
 * after `maxOutputTokens` words (finish reason `length`).
 */
export class DevelopmentProvider implements ModelProvider {
  readonly info: ProviderInfo = {
    providerId: 'builtin-development',
    kind: 'builtin-development',
    name: 'Built-in development model (deterministic, not an AI)',
    baseUrl: null,
  };

  readonly models: readonly ModelInfo[] = [
    {
      id: DEVELOPMENT_MODEL,
      providerId: 'builtin-development',
      name: 'Development model (deterministic, not an AI)',
      inputCentsPerMillionTokens: 0,
      outputCentsPerMillionTokens: 0,
      default: true,
      vision: true,
    },
  ];

  /** Real PNG and WAV files, made offline (see development-media.ts). */
  readonly media: MediaModels = new DevelopmentMediaModels();

  private reply(request: Pick<ChatRequest, 'messages' | 'tools' | 'toolChoice' | 'settings'>): ChatResult {
    const result = this.written(request);
    if (result.toolCalls.length > 0) return { ...result, finishReason: 'tool-calls' };
    const { stopSequences = [], maxOutputTokens } = request.settings ?? {};
    let text = result.text;
    for (const stop of stopSequences) if (text.includes(stop)) text = text.slice(0, text.indexOf(stop));
    const pieces = text.match(/\S+\s*/g) ?? [];
    if (maxOutputTokens !== undefined && pieces.length > maxOutputTokens) {
      const cut = pieces.slice(0, maxOutputTokens).join('').trimEnd();
      return { ...result, text: cut, usage: { ...result.usage, outputTokens: words(cut) }, finishReason: 'length' };
    }
    return { ...result, text, usage: { ...result.usage, outputTokens: words(text) }, finishReason: 'stop' };
  }

  private written(request: Pick<ChatRequest, 'messages' | 'tools' | 'toolChoice'>): ChatResult {
    const { messages } = request;
    const usage = (text: string) => ({
      inputTokens: messages.reduce((n, m) => n + words(m.role === 'user' ? textOf(m.content) : m.content), 0),
      outputTokens: words(text),
    });
    const results: Array<Extract<ChatMessage, { role: 'tool' }>> = [];
    for (let i = messages.length - 1; i >= 0 && messages[i]?.role === 'tool'; i -= 1)
      results.unshift(messages[i] as Extract<ChatMessage, { role: 'tool' }>);
    if (results.length > 0) {
      const text = `Development model (no AI provider is configured). ${results.map((r) => `The tool ${r.toolName} ${r.isError ? 'failed' : 'returned'}: ${r.content}`).join('\n')}`;
      return { text, usage: usage(text), toolCalls: [] };
    }
    const lastUser = [...messages].reverse().find((m) => m.role === 'user');
    const last = lastUser ? textOf(lastUser.content) : '';
    // A title request (conversations' titles): the first words of the user's message.
    if (messages[0]?.role === 'system' && messages[0].content.startsWith(TITLE_INSTRUCTION)) {
      const title = developmentTitle(last);
      return { text: title, usage: usage(title), toolCalls: [] };
    }
    if (request.tools?.length && request.toolChoice !== 'none' && messages.at(-1)?.role === 'user') {
      const earlier = messages.reduce((n, m) => n + (m.role === 'assistant' ? (m.toolCalls?.length ?? 0) : 0), 0);
      const toolCalls = last
        .split('\n')
        .map((line) => TOOL_LINE.exec(line.trim()))
        .filter((match): match is RegExpExecArray => match !== null)
        .map((match, i) => ({ toolCallId: `call_${earlier + i + 1}`, toolName: match[1] as string, arguments: lineArguments(match[2]) }));
      if (toolCalls.length > 0) return { text: '', usage: usage(''), toolCalls };
    }
    let text = `Development model (no AI provider is configured). You wrote: ${last}`;
    // Images it was given (a message with attachments): what it received, deterministically.
    if (lastUser) text += describeImages(lastUser.content);
    // A grounded turn: the sources the prompt gave it, or that none matched or the search failed.
    const grounding = groundingIn(messages);
    if (grounding?.state === 'found') text += `\n\nSources: ${grounding.sources.map((s) => `[${s.number}] ${s.title}`).join('; ')}`;
    else if (grounding?.state === 'none') text += '\n\nSources: none of your knowledge matched.';
    else if (grounding?.state === 'failed') text += '\n\nSources: unavailable (your knowledge could not be searched).';
    return { text, usage: usage(text), toolCalls: [] };
  }

  async generate(request: ChatRequest): Promise<ChatResult> {
    request.signal.throwIfAborted();
    return this.reply(request);
  }

  async *stream(request: ChatRequest): AsyncIterable<ChatPart> {
    const { text, usage, toolCalls, finishReason } = this.reply(request);
    for (const piece of text.match(/\S+\s*/g) ?? []) {
      await nextTurn();
      request.signal.throwIfAborted();
      yield { type: 'delta', text: piece };
    }
    for (const call of toolCalls) {
      await nextTurn();
      request.signal.throwIfAborted();
      yield { type: 'tool-call', call };
    }
    yield { type: 'finish', usage, finishReason };
  }
}
