import { setImmediate as nextTurn } from 'node:timers/promises';
import type { LanguageModel, LanguageModelUsage } from 'ai';
import { groundingIn } from './grounding';

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

/**
 * A provider (models, embeddings) failed. `message` is for API callers, stored replies and webhook
 * payloads: it never holds an address; `detail` (the underlying error) is for the operator's log.
 */
export class ProviderFailure extends Error {
  constructor(
    message: string,
    readonly detail: string = message,
  ) {
    super(message);
  }
}

/** The model provider failed (see ProviderFailure). */
export class ModelProviderFailure extends ProviderFailure {
  override name = 'ModelProviderFailure';
}

/** URLs, host:port pairs and IP addresses, which a provider's or a network error may carry. */
const ADDRESS = /\b[a-z][a-z0-9+.-]*:\/\/\S+|\[[0-9a-f:]+\](?::\d+)?|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*:\d{2,5}\b/gi;

/** A text with every address in it replaced by `[address]`. */
export const withoutAddresses = (text: string) => text.replace(ADDRESS, '[address]');

/** The provider's own error message in an OpenAI-format error body, if any. */
function providerMessage(body: unknown): string | null {
  if (typeof body !== 'string') return null;
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
    const message = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message);
    return typeof message === 'string' ? message : null;
  } catch {
    return null;
  }
}

/**
 * What the caller is told about a failed call: reached or not, the status and the provider's own
 * message (shortened, addresses removed); never the host, port or IP address the service called.
 */
export function describeProviderError(error: unknown, what = 'model provider'): string {
  const e = error as { statusCode?: unknown; responseBody?: unknown; name?: unknown; cause?: unknown } | null;
  if (typeof e?.statusCode === 'number') {
    const said = providerMessage(e.responseBody);
    return withoutAddresses(`The ${what} answered ${e.statusCode}${said ? `: ${said.slice(0, 300)}` : '.'}`);
  }
  // Duck-typed: fetch's TypeError may come from another realm (a test's VM context) than ours.
  const message = (error as { message?: unknown } | null)?.message;
  const cause = e?.cause as { code?: unknown } | undefined;
  if ((typeof e?.name === 'string' && /APICallError/.test(e.name)) || (typeof message === 'string' && /fetch failed/.test(message)) || typeof cause?.code === 'string') {
    return `The ${what} could not be reached.`;
  }
  return `The ${what}'s answer could not be read.`;
}

/** The underlying error's text (with its cause's), for the log only. */
export function errorDetail(error: unknown): string {
  const e = error as { message?: unknown; cause?: { message?: unknown; code?: unknown } } | null;
  const own = typeof e?.message === 'string' ? e.message : String(error);
  const cause = typeof e?.cause?.message === 'string' && !own.includes(e.cause.message) ? ` (${e.cause.message})` : '';
  return `${own}${cause}`.slice(0, 1000);
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

/** Where a provider reports its failures' detail (once, at warn level, without a stack). */
export type FailureLog = (message: string, meta: Record<string, unknown>) => void;

/** The provider's models as `GET {base}/models` lists them (OpenAI format), in its order. */
export async function listProviderModels(options: { baseUrl: string; apiKey: string | null; timeoutMs?: number }): Promise<string[]> {
  let response: Response;
  try {
    response = await fetch(`${options.baseUrl.replace(/\/$/, '')}/models`, {
      headers: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
      signal: AbortSignal.timeout(options.timeoutMs ?? 15_000),
    });
  } catch (error) {
    throw new ModelProviderFailure('The model provider could not be reached.', errorDetail(error));
  }
  const text = await response.text();
  if (!response.ok) throw new ModelProviderFailure(describeProviderError({ statusCode: response.status, responseBody: text }), text.slice(0, 500));
  let ids: unknown;
  try {
    ids = (JSON.parse(text) as { data?: Array<{ id?: unknown }> }).data?.map((m) => m.id);
  } catch {
    ids = undefined;
  }
  if (!Array.isArray(ids) || ids.length === 0 || ids.some((id) => typeof id !== 'string' || id === '')) {
    throw new ModelProviderFailure("The model provider's model list is empty or not in the OpenAI format ({ data: [{ id }] }).", text.slice(0, 500));
  }
  return ids as string[];
}

/** Loads the AI SDK and a provider's chat models (loaded on the first call: they are large). */
export type ChatModelLoader = () => Promise<{ ai: typeof import('ai'); model: (id: string) => LanguageModel }>;

/**
 * Chat through one of the AI SDK's providers: the whole reply, or the reply as it is written. No
 * retries here: a failed reply is reported, and stored as failed. `describe` says what a caller is
 * told about a failure (never an address).
 */
export class SdkChat {
  private sdk?: ReturnType<ChatModelLoader>;

  constructor(
    private readonly loader: ChatModelLoader,
    private readonly log: FailureLog = () => undefined,
    private readonly describe: (error: unknown) => string = (error) => describeProviderError(error),
  ) {}

  private load() {
    this.sdk ??= this.loader();
    return this.sdk;
  }

  /** Errors of an aborted call are the abort's; anything else is the provider's failure, logged here. */
  private failure(error: unknown, request: ChatRequest): unknown {
    if (request.signal.aborted) return request.signal.reason ?? error;
    const failure = new ModelProviderFailure(this.describe(error), errorDetail(error));
    this.log('model provider failed', { model: request.model, error: failure.message, detail: failure.detail });
    return failure;
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
      throw this.failure(error, request);
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
      throw this.failure(error, request);
    }
  }
}

/**
 * An OpenAI-compatible chat completions API (OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM…),
 * through the AI SDK's provider.
 */
export class OpenAICompatibleProvider implements ModelProvider {
  readonly info: ProviderInfo;
  readonly models: readonly ModelInfo[];
  private readonly chat: SdkChat;

  constructor(options: { baseUrl: string; apiKey: string | null; models: readonly ModelPrice[] }, log: FailureLog = () => undefined) {
    this.info = { providerId: 'openai-compatible', kind: 'openai-compatible', name: 'OpenAI-compatible provider', baseUrl: options.baseUrl };
    this.models = options.models.map((m, i) => ({ ...m, providerId: this.info.providerId, name: m.id, default: i === 0 }));
    this.chat = new SdkChat(async () => {
      const [ai, { createOpenAICompatible }] = await Promise.all([import('ai'), import('@ai-sdk/openai-compatible')]);
      const provider = createOpenAICompatible({
        name: 'openai-compatible',
        baseURL: options.baseUrl,
        apiKey: options.apiKey ?? undefined,
        includeUsage: true,
      });
      return { ai, model: (id: string) => provider.chatModel(id) };
    }, log);
  }

  generate(request: ChatRequest) {
    return this.chat.generate(request);
  }

  stream(request: ChatRequest) {
    return this.chat.stream(request);
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

  /**
   * Quotes the last user message and, for a grounded turn, lists the sources the prompt gave it
   * (`Sources: [1] title; [2] title`), or says that none matched or the search failed.
   */
  private reply(messages: ChatMessage[]): { text: string; usage: ChatUsage } {
    const last = [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';
    let text = `Development model (no AI provider is configured). You wrote: ${last}`;
    const grounding = groundingIn(messages);
    if (grounding?.state === 'found') text += `\n\nSources: ${grounding.sources.map((s) => `[${s.number}] ${s.title}`).join('; ')}`;
    else if (grounding?.state === 'none') text += '\n\nSources: none of your knowledge matched.';
    else if (grounding?.state === 'failed') text += '\n\nSources: unavailable (your knowledge could not be searched).';
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
