import { connectionFailure } from '../net/failures';
import type { MediaModels } from './media';

/** A model as the service offers it, with the prices the deployment configured. */
export interface ModelInfo {
  id: string;
  providerId: string;
  name: string;
  inputCentsPerMillionTokens: number;
  outputCentsPerMillionTokens: number;
  default: boolean;
  /** Whether it reads images (image parts in a user message); false when absent. */
  vision?: boolean;
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
  /** The arguments' JSON text as the model wrote it, when the provider gave it as text. */
  argumentsText?: string;
}

/**
 * A part of a user message: text, or an image (its bytes, media type and file name) for a model
 * that reads images.
 */
export type UserContentPart = { type: 'text'; text: string } | { type: 'image'; data: Uint8Array; mediaType: string; name: string };

/** A user message's text: its content, or its text parts joined. */
export const textOf = (content: string | UserContentPart[]): string =>
  typeof content === 'string'
    ? content
    : content
        .filter((p) => p.type === 'text')
        .map((p) => p.text)
        .join('\n');

/**
 * One message of a prompt. An assistant message may carry the tool calls the model made; a `tool`
 * message is one call's result (`content`), as given back to the model.
 */
export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | UserContentPart[] }
  | { role: 'assistant'; content: string; toolCalls?: ModelToolCall[] }
  | { role: 'tool'; content: string; toolCallId: string; toolName: string; isError: boolean };

/** The sampling settings a caller may give a model call (a provider that lacks one ignores it). */
export interface CallSettings {
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  stopSequences?: string[];
  presencePenalty?: number;
  frequencyPenalty?: number;
  seed?: number;
}

/** Whether the model may call the tools it is offered: `auto` (the default), `none`, `required`, or one named tool. */
export type ToolChoice = 'auto' | 'none' | 'required' | { toolName: string };

/** Why a model stopped writing. */
export type FinishReason = 'stop' | 'length' | 'tool-calls' | 'content-filter' | 'other';

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  /** Aborts the call: the client went away, or the deployment's timeout ran out. */
  signal: AbortSignal;
  /** The tools the model may call (none when absent or empty). The caller runs them. */
  tools?: ToolSpec[];
  /** With `tools`: whether and which it may call (`auto` when absent). */
  toolChoice?: ToolChoice;
  settings?: CallSettings;
}

/** One model call's answer: its text, the tool calls it made (none: the turn's answer), its usage. */
export interface ChatResult {
  text: string;
  usage: ChatUsage;
  toolCalls: ModelToolCall[];
  /** Why it stopped, when the provider said. */
  finishReason?: FinishReason;
}

export interface ChatUsage {
  inputTokens: number;
  outputTokens: number;
}

export type ChatPart =
  | { type: 'delta'; text: string }
  | { type: 'tool-call'; call: ModelToolCall }
  | { type: 'finish'; usage: ChatUsage; finishReason?: FinishReason };

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
  const failure = connectionFailure(error);
  if (failure) return `The ${what} could not be reached: ${failure.reason}.`;
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

/** Where a provider reports its failures' detail (once, at warn level, without a stack). */
export type FailureLog = (message: string, meta: Record<string, unknown>) => void;

/**
 * Whether a model reads images, from its id (model lists do not say): the hosted providers'
 * current families, and the open vision models an OpenAI-compatible server may serve.
 */
export const readsImages = (id: string): boolean =>
  /gpt-4o|gpt-4\.1|gpt-5|^o\d|claude|gemini|llava|vision|pixtral|[-_.]vl([-_:.]|$)/.test(id.toLowerCase());
