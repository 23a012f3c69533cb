import { setImmediate as nextTurn } from 'node:timers/promises';
import type { LanguageModel, LanguageModelUsage } from 'ai';

/** A model as the service offers it, with the prices the deployment configured. */
export interface ModelInfo {
  id: string;
  providerId: string;
  name: string;
  inputCentsPerMillionTokens: number;
  outputCentsPerMillionTokens: number;
  default: boolean;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  /** Aborts the call: the client went away, or the deployment's timeout ran out. */
  signal: AbortSignal;
}

export interface ChatUsage {
  inputTokens: number;
  outputTokens: number;
}

export type ChatPart = { type: 'delta'; text: string } | { type: 'finish'; usage: ChatUsage };

export interface ProviderInfo {
  providerId: string;
  kind: 'openai-compatible' | 'builtin-development';
  name: string;
  baseUrl: string | null;
}

/** The one interface chat and automations call a model through. */
export interface ModelProvider {
  readonly info: ProviderInfo;
  readonly models: readonly ModelInfo[];
  /** The whole reply at once. */
  generate(request: ChatRequest): Promise<{ text: string; usage: ChatUsage }>;
  /** The reply as it is written, then its usage. */
  stream(request: ChatRequest): AsyncIterable<ChatPart>;
}

/**
 * The provider's model `id`, or its default model when `id` is undefined or null; undefined when
 * the provider does not offer `id`.
 */
export function findModel(provider: ModelProvider, id?: string | null): ModelInfo | undefined {
  if (id === undefined || id === null) return provider.models.find((m) => m.default) ?? provider.models[0];
  return provider.models.find((m) => m.id === id);
}

/** The provider answered with an error (or not in the protocol); the message is for people. */
export class ModelProviderFailure extends Error {
  override name = 'ModelProviderFailure';
}

/** A configured model: its id and prices in cents per million input and output tokens. */
export interface ModelPrice {
  id: string;
  inputCentsPerMillionTokens: number;
  outputCentsPerMillionTokens: number;
}

/** The AI SDK takes the system prompt apart from the conversation. */
const split = (messages: ChatMessage[]) => ({
  system: messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n\n') || undefined,
  messages: messages.filter((m): m is ChatMessage & { role: 'user' | 'assistant' } => m.role !== 'system'),
});

const usageOf = (usage: LanguageModelUsage | undefined): ChatUsage => ({
  inputTokens: usage?.inputTokens ?? 0,
  outputTokens: usage?.outputTokens ?? 0,
});

/** Errors of an aborted call are the abort's; anything else is the provider's failure. */
function providerFailure(error: unknown, signal: AbortSignal): unknown {
  if (signal.aborted) return signal.reason ?? error;
  const message = error instanceof Error ? error.message : String(error);
  return new ModelProviderFailure(message.slice(0, 500));
}

/**
 * An OpenAI-compatible chat completions API (OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM…),
 * through the AI SDK's provider. No retries here: a failed reply is reported, and stored as failed.
 */
export class OpenAICompatibleProvider implements ModelProvider {
  readonly info: ProviderInfo;
  readonly models: readonly ModelInfo[];
  private readonly options: { baseUrl: string; apiKey: string | null };
  /** The AI SDK and the provider, loaded on the first call (they are large, and unused until then). */
  private sdk?: Promise<{ ai: typeof import('ai'); model: (id: string) => LanguageModel }>;

  constructor(options: { baseUrl: string; apiKey: string | null; models: readonly ModelPrice[] }) {
    this.info = { providerId: 'openai-compatible', kind: 'openai-compatible', name: 'OpenAI-compatible provider', baseUrl: options.baseUrl };
    this.models = options.models.map((m, i) => ({ ...m, providerId: this.info.providerId, name: m.id, default: i === 0 }));
    this.options = { baseUrl: options.baseUrl, apiKey: options.apiKey };
  }

  private load() {
    this.sdk ??= Promise.all([import('ai'), import('@ai-sdk/openai-compatible')]).then(([ai, { createOpenAICompatible }]) => {
      const provider = createOpenAICompatible({
        name: 'openai-compatible',
        baseURL: this.options.baseUrl,
        apiKey: this.options.apiKey ?? undefined,
        includeUsage: true,
      });
      return { ai, model: (id: string) => provider.chatModel(id) };
    });
    return this.sdk;
  }

  async generate(request: ChatRequest) {
    try {
      const { ai, model } = await this.load();
      const result = await ai.generateText({
        model: model(request.model),
        ...split(request.messages),
        abortSignal: request.signal,
        maxRetries: 0,
      });
      return { text: result.text, usage: usageOf(result.usage) };
    } catch (error) {
      throw providerFailure(error, request.signal);
    }
  }

  async *stream(request: ChatRequest): AsyncIterable<ChatPart> {
    try {
      const { ai, model } = await this.load();
      const result = ai.streamText({
        model: model(request.model),
        ...split(request.messages),
        abortSignal: request.signal,
        maxRetries: 0,
        onError: () => undefined, // errors arrive in the stream below (the default prints them)
      });
      for await (const part of result.fullStream) {
        if (part.type === 'text-delta' && part.text !== '') yield { type: 'delta', text: part.text };
        else if (part.type === 'error') throw part.error;
        else if (part.type === 'abort') throw request.signal.reason ?? new Error('aborted');
        else if (part.type === 'finish') yield { type: 'finish', usage: usageOf(part.totalUsage) };
      }
    } catch (error) {
      throw providerFailure(error, request.signal);
    }
  }
}

export const DEVELOPMENT_MODEL = 'development';

const words = (text: string) => text.split(/\s+/).filter((w) => w !== '').length;

/**
 * The built-in development provider, used when no provider is configured: deterministic, free
 * and not an AI. Its reply quotes the last user message, so that chat can be developed and tested
 * without a model; token counts are word counts.
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
    },
  ];

  private reply(messages: ChatMessage[]): { text: string; usage: ChatUsage } {
    const last = [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';
    const text = `Development model (no AI provider is configured). You wrote: ${last}`;
    return { text, usage: { inputTokens: messages.reduce((n, m) => n + words(m.content), 0), outputTokens: words(text) } };
  }

  async generate(request: ChatRequest) {
    request.signal.throwIfAborted();
    return this.reply(request.messages);
  }

  async *stream(request: ChatRequest): AsyncIterable<ChatPart> {
    const { text, usage } = this.reply(request.messages);
    for (const piece of text.match(/\S+\s*/g) ?? []) {
      await nextTurn();
      request.signal.throwIfAborted();
      yield { type: 'delta', text: piece };
    }
    yield { type: 'finish', usage };
  }
}
