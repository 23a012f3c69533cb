import type {
  JSONSchema7,
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3StreamPart,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import { type MediaModelPrice, type MediaModels, OpenAIMediaModels } from './media';
import {
  type ChatMessage,
  type ChatPart,
  type ChatRequest,
  type ChatResult,
  type ChatUsage,
  describeProviderError,
  type FinishReason,
  errorDetail,
  type FailureLog,
  type ModelInfo,
  type ModelPrice,
  type ModelProvider,
  ModelProviderFailure,
  type ModelToolCall,
  type ProviderInfo,
  readsImages,
  type ToolChoice,
} from './models';

/**
 * Chat through the AI SDK's providers: the prompt in their form, `SdkChat` on top of a provider
 * package, and the deployment's OpenAI-compatible provider with its model list.
 */

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
    if (m.role === 'user') {
      // An image is the AI SDK's file part (an image media type): each provider sends it in its own format.
      const parts = typeof m.content === 'string' ? [{ type: 'text' as const, text: m.content }] : m.content;
      prompt.push({
        role: 'user',
        content: parts.map((p) =>
          p.type === 'text'
            ? { type: 'text' as const, text: p.text }
            : { type: 'file' as const, data: p.data, mediaType: p.mediaType, filename: p.name },
        ),
      });
    } else if (m.role === 'assistant') {
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

/** A tool choice in the providers' form. */
const toolChoiceOf = (choice: ToolChoice | undefined): NonNullable<ModelCallOptions['toolChoice']> =>
  choice === undefined ? { type: 'auto' } : typeof choice === 'string' ? { type: choice } : { type: 'tool', toolName: choice.toolName };

/**
 * A model call's options: the prompt, the caller's settings, and the tools as definitions only
 * (calls come back to the caller).
 */
const callOptions = (request: ChatRequest): ModelCallOptions => ({
  prompt: toPrompt(request.messages),
  abortSignal: request.signal,
  ...request.settings,
  ...(request.tools?.length
    ? {
        tools: request.tools.map((t) => ({
          type: 'function' as const,
          name: t.name,
          description: t.description,
          inputSchema: t.inputSchema as JSONSchema7,
        })),
        toolChoice: toolChoiceOf(request.toolChoice),
      }
    : {}),
});

/** The providers' finish reason, as the service names it. */
const finishOf = (reason: { unified: string } | string | undefined): FinishReason | undefined => {
  const unified = typeof reason === 'string' ? reason : reason?.unified;
  if (unified === 'stop' || unified === 'length' || unified === 'tool-calls' || unified === 'content-filter') return unified;
  return unified === undefined ? undefined : 'other';
};

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
  return { toolCallId: c.toolCallId, toolName: c.toolName, arguments: input, argumentsText: c.input };
}

const usageOf = (usage: LanguageModelV3Usage | undefined): ChatUsage => ({
  inputTokens: usage?.inputTokens.total ?? 0,
  outputTokens: usage?.outputTokens.total ?? 0,
});

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
      return { text, usage: usageOf(result.usage), toolCalls, finishReason: finishOf(result.finishReason) };
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
        else if (part.type === 'finish') yield { type: 'finish', usage: usageOf(part.usage), finishReason: finishOf(part.finishReason) };
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
    this.models = options.models.map((m, i) => ({
      ...m,
      providerId: this.info.providerId,
      name: m.id,
      default: i === 0,
      vision: readsImages(m.id),
    }));
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
