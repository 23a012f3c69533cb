import { setImmediate as nextTurn } from 'node:timers/promises';
import type {
  JSONSchema7,
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3StreamPart,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import { DevelopmentMediaModels } from './development-media';
import { groundingIn } from './grounding';
import { type MediaModelPrice, type MediaModels, OpenAIMediaModels } from './media';

/** A model as the service offers it, with the prices the deployment configured. */
export interface ModelInfo {
  id: string;
  providerId: string;
  name: string;
  inputCentsPerMillionTokens: number;
  outputCentsPerMillionTokens: number;
  default: boolean;
}

/** A tool the model may call: its name, what it does, and the JSON Schema of its input. */
export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** A call the model made: `arguments` as the model gave them (an object, or a string it could not parse). */
export interface ModelToolCall {
  toolCallId: string;
  toolName: string;
  arguments: unknown;
}

/**
 * One message of a prompt. An assistant message may carry the tool calls the model made; a `tool`
 * message is one call's result (`content`), as given back to the model.
 */
export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ModelToolCall[] }
  | { role: 'tool'; content: string; toolCallId: string; toolName: string; isError: boolean };

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  /** Aborts the call: the client went away, or the deployment's timeout ran out. */
  signal: AbortSignal;
  /** The tools the model may call (none when absent or empty). The caller runs them. */
  tools?: ToolSpec[];
}

/** One model call's answer: its text, the tool calls it made (none: the turn's answer), its usage. */
export interface ChatResult {
  text: string;
  usage: ChatUsage;
  toolCalls: ModelToolCall[];
}

export interface ChatUsage {
  inputTokens: number;
  outputTokens: number;
}

export type ChatPart = { type: 'delta'; text: string } | { type: 'tool-call'; call: ModelToolCall } | { type: 'finish'; usage: ChatUsage };

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
  /** The whole reply at once (with the tool calls the model made, if it was offered tools). */
  generate(request: ChatRequest): Promise<ChatResult>;
  /** The reply as it is written (and its tool calls), then its usage. */
  stream(request: ChatRequest): AsyncIterable<ChatPart>;
  /** Its image, transcription and speech models, if it has any. */
  readonly media?: MediaModels;
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
const ADDRESS =
  /\b[a-z][a-z0-9+.-]*:\/\/\S+|\[[0-9a-f:]+\](?::\d+)?|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*:\d{2,5}\b/gi;

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
  if (
    (typeof e?.name === 'string' && /APICallError/.test(e.name)) ||
    (typeof message === 'string' && /fetch failed/.test(message)) ||
    typeof cause?.code === 'string'
  ) {
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

type ModelCallOptions = LanguageModelV3CallOptions;
type ModelPrompt = ModelCallOptions['prompt'];

/**
 * A prompt as the AI SDK's providers take it: the system prompt first, then the messages, tool
 * calls and results as content parts, consecutive results in one message (as the AI SDK's own
 * calls send them: providers that need results grouped rely on it).
 */
function toPrompt(messages: ChatMessage[]): ModelPrompt {
  const system = messages
    .filter((m) => m.role === 'system')
    .map((m) => m.content)
    .join('\n\n');
  const prompt: ModelPrompt = system === '' ? [] : [{ role: 'system', content: system }];
  for (const m of messages) {
    if (m.role === 'user') prompt.push({ role: 'user', content: [{ type: 'text', text: m.content }] });
    else if (m.role === 'assistant') {
      prompt.push({
        role: 'assistant',
        content: [
          ...(m.content !== '' ? [{ type: 'text' as const, text: m.content }] : []),
          ...(m.toolCalls ?? []).map((c) => ({
            type: 'tool-call' as const,
            toolCallId: c.toolCallId,
            toolName: c.toolName,
            input: c.arguments,
          })),
        ],
      });
    } else if (m.role === 'tool') {
      const result = {
        type: 'tool-result' as const,
        toolCallId: m.toolCallId,
        toolName: m.toolName,
        output: { type: m.isError ? ('error-text' as const) : ('text' as const), value: m.content },
      };
      const last = prompt.at(-1);
      if (last?.role === 'tool') last.content.push(result);
      else prompt.push({ role: 'tool', content: [result] });
    }
  }
  return prompt;
}

/** A model call's options: the prompt, and the tools as definitions only (calls come back to the caller). */
const callOptions = (request: ChatRequest): ModelCallOptions => ({
  prompt: toPrompt(request.messages),
  abortSignal: request.signal,
  ...(request.tools?.length
    ? {
        tools: request.tools.map((t) => ({
          type: 'function' as const,
          name: t.name,
          description: t.description,
          inputSchema: t.inputSchema as JSONSchema7,
        })),
        toolChoice: { type: 'auto' as const },
      }
    : {}),
});

/** A call as the model wrote it: its arguments parsed (none: `{}`), or the text when it is not JSON. */
function callOf(c: { toolCallId: string; toolName: string; input: string }): ModelToolCall {
  let input: unknown = c.input;
  if (c.input.trim() === '') input = {};
  else {
    try {
      input = JSON.parse(c.input) as unknown;
    } catch {
      // Left as the text: the caller tells the model its arguments must be a JSON object.
    }
  }
  return { toolCallId: c.toolCallId, toolName: c.toolName, arguments: input };
}

const usageOf = (usage: LanguageModelV3Usage | undefined): ChatUsage => ({
  inputTokens: usage?.inputTokens.total ?? 0,
  outputTokens: usage?.outputTokens.total ?? 0,
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
  if (!response.ok)
    throw new ModelProviderFailure(describeProviderError({ statusCode: response.status, responseBody: text }), text.slice(0, 500));
  let ids: unknown;
  try {
    ids = (JSON.parse(text) as { data?: Array<{ id?: unknown }> }).data?.map((m) => m.id);
  } catch {
    ids = undefined;
  }
  if (!Array.isArray(ids) || ids.length === 0 || ids.some((id) => typeof id !== 'string' || id === '')) {
    throw new ModelProviderFailure(
      "The model provider's model list is empty or not in the OpenAI format ({ data: [{ id }] }).",
      text.slice(0, 500),
    );
  }
  return ids as string[];
}

/** Loads a provider of the AI SDK (on the first call: they are large); its chat model of an id. */
export type ChatModelLoader = () => Promise<(id: string) => LanguageModelV3>;

/**
 * Chat through one of the AI SDK's providers, called through its provider interface (`doGenerate`,
 * `doStream`): the prompt is already in the form the providers take, so the SDK's prompt
 * validation and stream pipeline would only add time to the first token. A model object is made
 * once per id and kept (making one compiles its response schemas). No retries here: a failed
 * reply is reported, and stored as failed. `describe` says what a caller is told about a failure
 * (never an address).
 */
export class SdkChat {
  private factory?: ReturnType<ChatModelLoader>;
  private readonly models = new Map<string, LanguageModelV3>();

  constructor(
    private readonly loader: ChatModelLoader,
    private readonly log: FailureLog = () => undefined,
    private readonly describe: (error: unknown) => string = (error) => describeProviderError(error),
  ) {}

  private async model(id: string): Promise<LanguageModelV3> {
    const known = this.models.get(id);
    if (known) return known;
    this.factory ??= this.loader();
    const model = (await this.factory)(id);
    // Ids come from the deployment's list or a connection's: few, so the map stays small.
    this.models.set(id, model);
    return model;
  }

  /** Errors of an aborted call are the abort's; anything else is the provider's failure, logged here. */
  private failure(error: unknown, request: ChatRequest): unknown {
    if (request.signal.aborted) return request.signal.reason ?? error;
    const failure = new ModelProviderFailure(this.describe(error), errorDetail(error));
    this.log('model provider failed', { model: request.model, error: failure.message, detail: failure.detail });
    return failure;
  }

  async generate(request: ChatRequest): Promise<ChatResult> {
    try {
      const model = await this.model(request.model);
      const result = await model.doGenerate(callOptions(request));
      let text = '';
      const toolCalls: ModelToolCall[] = [];
      for (const part of result.content) {
        if (part.type === 'text') text += part.text;
        else if (part.type === 'tool-call' && !part.providerExecuted) toolCalls.push(callOf(part));
      }
      return { text, usage: usageOf(result.usage), toolCalls };
    } catch (error) {
      throw this.failure(error, request);
    }
  }

  async *stream(request: ChatRequest): AsyncIterable<ChatPart> {
    try {
      const model = await this.model(request.model);
      const { stream } = await model.doStream(callOptions(request));
      for await (const part of stream as unknown as AsyncIterable<LanguageModelV3StreamPart>) {
        if (part.type === 'text-delta' && part.delta !== '') yield { type: 'delta', text: part.delta };
        else if (part.type === 'tool-call' && !part.providerExecuted) yield { type: 'tool-call', call: callOf(part) };
        else if (part.type === 'error') throw part.error;
        else if (part.type === 'finish') yield { type: 'finish', usage: usageOf(part.usage) };
      }
      request.signal.throwIfAborted();
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
  readonly media: MediaModels;
  private readonly chat: SdkChat;

  constructor(
    options: {
      baseUrl: string;
      apiKey: string | null;
      models: readonly ModelPrice[];
      /** Its image, transcription and speech models (OpenAI's media APIs), none by default. */
      media?: { image: readonly MediaModelPrice[]; transcription: readonly MediaModelPrice[]; speech: readonly MediaModelPrice[] };
    },
    log: FailureLog = () => undefined,
  ) {
    this.info = {
      providerId: 'openai-compatible',
      kind: 'openai-compatible',
      name: 'OpenAI-compatible provider',
      baseUrl: options.baseUrl,
    };
    this.models = options.models.map((m, i) => ({ ...m, providerId: this.info.providerId, name: m.id, default: i === 0 }));
    this.media = new OpenAIMediaModels(
      { baseUrl: options.baseUrl, apiKey: options.apiKey, providerId: this.info.providerId },
      options.media,
    );
    this.chat = new SdkChat(async () => {
      const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
      const provider = createOpenAICompatible({
        name: 'openai-compatible',
        baseURL: options.baseUrl,
        apiKey: options.apiKey ?? undefined,
        includeUsage: true,
      });
      return (id: string) => provider.chatModel(id);
    }, log);
  }

  generate(request: ChatRequest): Promise<ChatResult> {
    return this.chat.generate(request);
  }

  stream(request: ChatRequest) {
    return this.chat.stream(request);
  }
}

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

/**
 * The built-in development provider, used when no provider is configured: deterministic, free
 * and not an AI. Its reply quotes the last user message, so that chat can be developed and tested
 * without a model; token counts are word counts.
 *
 * Tools, deterministically: offered tools, when the last message is the user's and has lines
 * `/tool <name> <json arguments>`, it calls those tools (ids `call_<n>`, counted over the prompt),
 * with no text; when the last messages are tool results, it answers quoting each result.
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

  /** Real PNG and WAV files, made offline (see development-media.ts). */
  readonly media: MediaModels = new DevelopmentMediaModels();

  private reply(request: Pick<ChatRequest, 'messages' | 'tools'>): ChatResult {
    const { messages } = request;
    const usage = (text: string) => ({ inputTokens: messages.reduce((n, m) => n + words(m.content), 0), outputTokens: words(text) });
    const results: Array<Extract<ChatMessage, { role: 'tool' }>> = [];
    for (let i = messages.length - 1; i >= 0 && messages[i]?.role === 'tool'; i -= 1)
      results.unshift(messages[i] as Extract<ChatMessage, { role: 'tool' }>);
    if (results.length > 0) {
      const text = `Development model (no AI provider is configured). ${results.map((r) => `The tool ${r.toolName} ${r.isError ? 'failed' : 'returned'}: ${r.content}`).join('\n')}`;
      return { text, usage: usage(text), toolCalls: [] };
    }
    const last = [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';
    if (request.tools?.length && messages.at(-1)?.role === 'user') {
      const earlier = messages.reduce((n, m) => n + (m.role === 'assistant' ? (m.toolCalls?.length ?? 0) : 0), 0);
      const toolCalls = last
        .split('\n')
        .map((line) => TOOL_LINE.exec(line.trim()))
        .filter((match): match is RegExpExecArray => match !== null)
        .map((match, i) => ({ toolCallId: `call_${earlier + i + 1}`, toolName: match[1] as string, arguments: lineArguments(match[2]) }));
      if (toolCalls.length > 0) return { text: '', usage: usage(''), toolCalls };
    }
    let text = `Development model (no AI provider is configured). You wrote: ${last}`;
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
    const { text, usage, toolCalls } = this.reply(request);
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
    yield { type: 'finish', usage };
  }
}
