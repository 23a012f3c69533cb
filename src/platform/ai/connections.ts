import type { LanguageModelV3 } from '@ai-sdk/provider';
import type { EmbeddingModel } from 'ai';
import { AddressNotAllowed, RedirectRefused, UrlNotAllowed } from '../net/outbound';
import { type Embedder, EmbeddingsFailure } from './embeddings';
import {
  type ChatRequest,
  type ChatResult,
  describeProviderError,
  errorDetail,
  type FailureLog,
  type ModelProvider,
  ModelProviderFailure,
  readsImages,
  withoutAddresses,
} from './models';
import { SdkChat } from './sdk-chat';

/**
 * Model provider connections that users bring with their own API key: the provider's wire format,
 * its model list, and its chat through the AI SDK's provider package. Every request goes through
 * the `fetch` given (the outbound guard), since the base URL is the user's choice.
 */
export type ConnectionKind = 'openai' | 'anthropic' | 'google' | 'openai_compatible';

export const CONNECTION_KINDS: readonly ConnectionKind[] = ['openai', 'anthropic', 'google', 'openai_compatible'];

/** The providers' own API base URLs (operator-trusted defaults; a user may override them). */
export const DEFAULT_BASE_URLS: Record<Exclude<ConnectionKind, 'openai_compatible'>, string> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com/v1',
  google: 'https://generativelanguage.googleapis.com/v1beta',
};

const ANTHROPIC_VERSION = '2023-06-01';

/** Where and how to reach one connection's provider. */
export interface ConnectionTarget {
  kind: ConnectionKind;
  /** The user's base URL, or null for the provider's own (never null for `openai_compatible`). */
  baseUrl: string | null;
  apiKey: string | null;
}

/** A model the provider's list named. */
export interface DiscoveredModel {
  id: string;
  contextWindow: number | null;
}

export type ModelKind = 'chat' | 'tools' | 'vision' | 'embeddings' | 'image' | 'transcription' | 'speech';

export function baseUrlOf(target: ConnectionTarget): string {
  const url = target.baseUrl ?? (target.kind === 'openai_compatible' ? null : DEFAULT_BASE_URLS[target.kind]);
  if (!url) throw new Error('an openai_compatible connection needs a base URL');
  return url.replace(/\/+$/, '');
}

/**
 * What a model does, from its id: providers' lists do not say, so the well-known families are
 * recognised (embedding, image, transcription and speech models by name; the chat models of the
 * hosted providers call tools, and their current families read images).
 */
export function modelKinds(kind: ConnectionKind, id: string): ModelKind[] {
  const name = id.toLowerCase();
  // Anthropic's API has no embeddings models (it points to another company's), so none is guessed.
  if (/embed/.test(name) && kind !== 'anthropic') return ['embeddings'];
  if (/whisper|transcribe/.test(name)) return ['transcription'];
  if (/(^|[-_/])tts|speech/.test(name)) return ['speech'];
  if (/dall-e|gpt-image|imagen/.test(name)) return ['image'];
  if (kind === 'openai_compatible') return readsImages(name) ? ['chat', 'vision'] : ['chat'];
  return readsImages(name) ? ['chat', 'tools', 'vision'] : ['chat', 'tools'];
}

/** A positive integer, or null. */
const tokens = (value: unknown): number | null => (typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : null);

/** The request that reads a provider's model list, in its own format. */
function listRequest(target: ConnectionTarget): { url: string; headers: Record<string, string> } {
  const base = baseUrlOf(target);
  const key = target.apiKey;
  switch (target.kind) {
    case 'anthropic':
      return {
        url: `${base}/models?limit=1000`,
        headers: { 'anthropic-version': ANTHROPIC_VERSION, ...(key ? { 'x-api-key': key } : {}) },
      };
    case 'google':
      return { url: `${base}/models?pageSize=1000`, headers: key ? { 'x-goog-api-key': key } : {} };
    default:
      return { url: `${base}/models`, headers: key ? { authorization: `Bearer ${key}` } : {} };
  }
}

/** The models a list answer names, or null when it is not in the provider's format. */
function parseList(kind: ConnectionKind, body: unknown): DiscoveredModel[] | null {
  const list = body as { data?: unknown; models?: unknown } | null;
  if (kind === 'google') {
    if (!Array.isArray(list?.models)) return null;
    const models = list.models as Array<{ name?: unknown; inputTokenLimit?: unknown }>;
    if (models.some((m) => typeof m.name !== 'string')) return null;
    return models.map((m) => ({ id: (m.name as string).replace(/^models\//, ''), contextWindow: tokens(m.inputTokenLimit) }));
  }
  if (!Array.isArray(list?.data)) return null;
  const models = list.data as Array<Record<string, unknown>>;
  if (models.some((m) => typeof m.id !== 'string' || m.id === '')) return null;
  // OpenRouter says `context_length`, vLLM `max_model_len`, Anthropic `max_input_tokens`.
  return models.map((m) => ({
    id: m.id as string,
    contextWindow: tokens(m.context_length) ?? tokens(m.max_model_len) ?? tokens(m.context_window) ?? tokens(m.max_input_tokens),
  }));
}

/** Removes the key (should a provider echo it) and any address from a text shown to users. */
export function scrub(text: string, apiKey: string | null): string {
  const withoutKey = apiKey ? text.split(apiKey).join('[api key]') : text;
  return withoutAddresses(withoutKey);
}

/**
 * What a user is told about a failed call through their connection: the guard's refusal, or the
 * provider's status and message (see describeProviderError), never the key or an address.
 */
export function describeConnectionError(error: unknown, apiKey: string | null): string {
  for (let e = error as { cause?: unknown } | null, depth = 0; e && depth < 4; e = e.cause as { cause?: unknown } | null, depth += 1) {
    if (e instanceof AddressNotAllowed) return `The connection's address is not allowed: it is a ${e.range} address.`;
    if (e instanceof UrlNotAllowed) return `The connection's URL is not allowed: it ${e.message}.`;
    if (e instanceof RedirectRefused) return `The model provider answered with a redirect (${e.status}), which is not followed.`;
  }
  return scrub(describeProviderError(error), apiKey);
}

/** Reads the provider's model list; throws ModelProviderFailure (a message fit for the user). */
export async function discoverModels(
  target: ConnectionTarget,
  guardedFetch: typeof fetch,
  signal?: AbortSignal,
): Promise<DiscoveredModel[]> {
  const { url, headers } = listRequest(target);
  let response: Response;
  let text: string;
  try {
    response = await guardedFetch(url, { headers, signal });
    text = await response.text();
  } catch (error) {
    throw new ModelProviderFailure(describeConnectionError(error, target.apiKey), scrub(errorDetail(error), target.apiKey));
  }
  if (!response.ok) {
    throw new ModelProviderFailure(
      scrub(describeProviderError({ statusCode: response.status, responseBody: text }), target.apiKey),
      scrub(text.slice(0, 500), target.apiKey),
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  const models = parseList(target.kind, parsed);
  if (!models)
    throw new ModelProviderFailure("The model provider's model list is not in its API's format.", scrub(text.slice(0, 500), target.apiKey));
  return models;
}

/** The AI SDK's chat model of a connection's provider, called through `guardedFetch`. */
async function languageModelFactory(target: ConnectionTarget, guardedFetch: typeof fetch): Promise<(id: string) => LanguageModelV3> {
  const baseURL = baseUrlOf(target);
  const apiKey = target.apiKey ?? '';
  switch (target.kind) {
    case 'anthropic': {
      const { createAnthropic } = await import('@ai-sdk/anthropic');
      const provider = createAnthropic({ baseURL, apiKey, fetch: guardedFetch });
      return (id) => provider.languageModel(id);
    }
    case 'google': {
      const { createGoogleGenerativeAI } = await import('@ai-sdk/google');
      const provider = createGoogleGenerativeAI({ baseURL, apiKey, fetch: guardedFetch });
      return (id) => provider.languageModel(id);
    }
    case 'openai': {
      // Chat completions, which proxies and gateways in front of OpenAI speak too.
      const { createOpenAI } = await import('@ai-sdk/openai');
      const provider = createOpenAI({ baseURL, apiKey, fetch: guardedFetch });
      return (id) => provider.chat(id);
    }
    case 'openai_compatible': {
      const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
      const provider = createOpenAICompatible({
        name: 'connection',
        baseURL,
        apiKey: target.apiKey ?? undefined,
        fetch: guardedFetch,
        includeUsage: true,
      });
      return (id) => provider.chatModel(id);
    }
  }
}

/** The chat of one connection, as chat and automations call a model (generate and stream). */
export class ConnectionChat implements Pick<ModelProvider, 'generate' | 'stream'> {
  private readonly chat: SdkChat;

  constructor(target: ConnectionTarget, guardedFetch: typeof fetch, log: FailureLog) {
    this.chat = new SdkChat(
      () => languageModelFactory(target, guardedFetch),
      (message, meta) =>
        log(message, { ...meta, error: scrub(String(meta.error), target.apiKey), detail: scrub(String(meta.detail), target.apiKey) }),
      (error) => describeConnectionError(error, target.apiKey),
    );
  }

  generate(request: ChatRequest): Promise<ChatResult> {
    return this.chat.generate(request);
  }

  stream(request: ChatRequest) {
    return this.chat.stream(request);
  }
}

/** Whether a connection's provider has an embeddings API the AI SDK calls (Anthropic has none). */
export const hasEmbeddings = (kind: ConnectionKind) => kind !== 'anthropic';

/** The AI SDK's embedding model of a connection's provider, called through `guardedFetch`. */
async function embeddingModelFactory(target: ConnectionTarget, guardedFetch: typeof fetch): Promise<(id: string) => EmbeddingModel> {
  const baseURL = baseUrlOf(target);
  const apiKey = target.apiKey ?? '';
  switch (target.kind) {
    case 'anthropic':
      throw new EmbeddingsFailure("Anthropic's API has no embeddings models.");
    case 'google': {
      const { createGoogleGenerativeAI } = await import('@ai-sdk/google');
      const provider = createGoogleGenerativeAI({ baseURL, apiKey, fetch: guardedFetch });
      return (id) => provider.embeddingModel(id);
    }
    case 'openai': {
      const { createOpenAI } = await import('@ai-sdk/openai');
      const provider = createOpenAI({ baseURL, apiKey, fetch: guardedFetch });
      return (id) => provider.embeddingModel(id);
    }
    case 'openai_compatible': {
      const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
      const provider = createOpenAICompatible({ name: 'connection', baseURL, apiKey: target.apiKey ?? undefined, fetch: guardedFetch });
      return (id) => provider.embeddingModel(id);
    }
  }
}

const normalize = (vector: number[]) => {
  const norm = Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
  return norm === 0 ? vector : vector.map((v) => v / norm);
};

/**
 * The embeddings model of one connection, called with the AI SDK's `embedMany` (no retries: the
 * indexer backs off and a search answers lexically). Its `name` names the connection and the
 * model, so vectors of another user's or another model's embedder are never compared. The size is
 * learned from the first answer (kept in `learned`, by name, across instances of the class) and
 * later answers are checked against it, as HttpEmbedder does.
 */
export class ConnectionEmbedder implements Embedder {
  readonly name: string;

  constructor(
    private readonly settings: {
      target: ConnectionTarget;
      /** The provider's model id. */
      model: string;
      /** The modelId as `GET /api/v1/models` names it (`<connectionId>/<model>`). */
      modelId: string;
      guardedFetch: typeof fetch;
      timeoutMs: number;
      queryTimeoutMs: number;
      learned: Map<string, number>;
      /**
       * The vector size to ask for (OpenAI's `dimensions`, Gemini's `outputDimensionality`); the
       * model's own when absent. Its vectors are told apart by name (`…#<dimensions>`).
       */
      dimensions?: number;
    },
  ) {
    this.name = `${ConnectionEmbedder.nameOf(settings.modelId)}${settings.dimensions ? `#${settings.dimensions}` : ''}`;
  }

  /** The stored name of the vectors a connection's model makes (`connection:<connectionId>/<model>`). */
  static nameOf(modelId: string): string {
    return `connection:${modelId}`;
  }

  async embed(texts: string[], purpose: 'query' | 'index' = 'index'): Promise<number[][]> {
    return (await this.embedCounted(texts, purpose)).vectors;
  }

  /** The vectors and the tokens the provider counted (0 when it does not say). */
  async embedCounted(texts: string[], purpose: 'query' | 'index' = 'index'): Promise<{ vectors: number[][]; tokens: number }> {
    const { target, model, modelId, guardedFetch, learned, dimensions } = this.settings;
    const timeoutMs = purpose === 'query' ? this.settings.queryTimeoutMs : this.settings.timeoutMs;
    const signal = AbortSignal.timeout(timeoutMs);
    let result: { embeddings: number[][]; usage: { tokens: number } };
    // Each provider package reads its own key.
    const providerOptions = dimensions
      ? { openai: { dimensions }, openaiCompatible: { dimensions }, google: { outputDimensionality: dimensions } }
      : undefined;
    try {
      const [{ embedMany }, factory] = await Promise.all([import('ai'), embeddingModelFactory(target, guardedFetch)]);
      result = await embedMany({ model: factory(model), values: texts, maxRetries: 0, abortSignal: signal, providerOptions });
    } catch (error) {
      if (error instanceof EmbeddingsFailure) throw error;
      if (signal.aborted)
        throw new EmbeddingsFailure(`The embeddings model "${modelId}" did not answer within ${timeoutMs} ms.`, errorDetail(error), true);
      throw new EmbeddingsFailure(describeConnectionError(error, target.apiKey), scrub(errorDetail(error), target.apiKey));
    }
    const vectors = result.embeddings;
    if (vectors.length !== texts.length || vectors.some((v) => !Array.isArray(v) || v.length === 0)) {
      throw new EmbeddingsFailure(`The embeddings model "${modelId}" returned ${vectors.length} vectors for ${texts.length} texts.`);
    }
    const expected = dimensions ?? learned.get(this.name) ?? (vectors[0] as number[]).length;
    const other = vectors.find((v) => v.length !== expected);
    if (other) {
      throw new EmbeddingsFailure(
        `The embeddings model "${modelId}" returned vectors of ${other.length} dimensions; expected ${expected} (the size of its first answer).`,
      );
    }
    if (!learned.has(this.name)) learned.set(this.name, expected);
    const tokens = Number.isFinite(result.usage?.tokens) ? Math.max(0, Math.trunc(result.usage.tokens)) : 0;
    return { vectors: vectors.map(normalize), tokens };
  }
}
