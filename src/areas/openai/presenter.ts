/** The OpenAI-compatible API's answers, in OpenAI's shapes (the document's schemas of tag `OpenAI compatible`). */
import type { ChatUsage, FinishReason, ModelToolCall } from '../../platform/ai/models';
import type { Schemas } from '../../platform/api-types';

type ToolCallJson = Schemas['ChatCompletionToolCall'];
type FinishJson = Schemas['ChatCompletionFinishReason'];

/** A completion's identity: its id, when it was made (seconds) and the model as the client named it. */
export interface CompletionHead {
  id: string;
  created: number;
  model: string;
}

/** A model call's outcome, as a completion shows it. */
export interface CompletionOutcome {
  text: string;
  toolCalls: ModelToolCall[];
  finishReason: FinishReason | undefined;
  usage: ChatUsage;
}

/** A model the caller may call, as `GET /v1/models` lists it. */
export interface ApiModel {
  id: string;
  ownedBy: string;
}

export const presentModels = (models: ApiModel[]): Schemas['OpenAIModelList'] => ({
  object: 'list',
  data: models.map((m) => ({ id: m.id, object: 'model', created: 0, owned_by: m.ownedBy })),
});

/** A call's arguments as OpenAI gives them: the JSON text as the model wrote it, else the parsed value as JSON. */
const argumentsText = (call: ModelToolCall) =>
  call.argumentsText !== undefined && call.argumentsText.trim() !== ''
    ? call.argumentsText
    : typeof call.arguments === 'string'
      ? call.arguments
      : JSON.stringify(call.arguments ?? {});

export const presentToolCall = (call: ModelToolCall): ToolCallJson => ({
  id: call.toolCallId,
  type: 'function',
  function: { name: call.toolName, arguments: argumentsText(call) },
});

/** OpenAI's finish reason: `tool_calls` whenever the model called tools (as OpenAI says it). */
export function finishReasonOf(outcome: Pick<CompletionOutcome, 'toolCalls' | 'finishReason'>): FinishJson {
  if (outcome.toolCalls.length > 0) return 'tool_calls';
  if (outcome.finishReason === 'length') return 'length';
  if (outcome.finishReason === 'content-filter') return 'content_filter';
  return 'stop';
}

export const presentUsage = (usage: ChatUsage): Schemas['ChatCompletionUsage'] => ({
  prompt_tokens: usage.inputTokens,
  completion_tokens: usage.outputTokens,
  total_tokens: usage.inputTokens + usage.outputTokens,
});

export function presentCompletion(head: CompletionHead, outcome: CompletionOutcome): Schemas['ChatCompletion'] {
  const toolCalls = outcome.toolCalls.map(presentToolCall);
  return {
    id: head.id,
    object: 'chat.completion',
    created: head.created,
    model: head.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: outcome.text === '' && toolCalls.length > 0 ? null : outcome.text,
          refusal: null,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        logprobs: null,
        finish_reason: finishReasonOf(outcome),
      },
    ],
    usage: presentUsage(outcome.usage),
  };
}

/** What a chunk's choice says: a piece of the answer, or its end. */
export type ChunkDelta =
  | { role: 'assistant'; content: string }
  | { content: string }
  | { tool_calls: Array<ToolCallJson & { index: number }> }
  | Record<string, never>;

/** The chunks of a streamed completion, in OpenAI's `chat.completion.chunk` shape. */
export class ChunkPresenter {
  constructor(
    private readonly head: CompletionHead,
    /** With `stream_options.include_usage`: `usage: null` on each chunk, and the usage chunk at the end. */
    private readonly includeUsage: boolean,
  ) {}

  private chunk(choices: unknown[], usage?: ChatUsage) {
    const { id, created, model } = this.head;
    return {
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices,
      ...(this.includeUsage ? { usage: usage ? presentUsage(usage) : null } : {}),
    };
  }

  /** A choice's delta (`finish_reason: null` until the end). */
  delta(delta: ChunkDelta, finishReason: FinishJson | null = null) {
    return this.chunk([{ index: 0, delta, logprobs: null, finish_reason: finishReason }]);
  }

  /** The first chunk: the role. */
  start() {
    return this.delta({ role: 'assistant', content: '' });
  }

  text(content: string) {
    return this.delta({ content });
  }

  /** One tool call, whole, as the `index`-th of the answer's calls. */
  toolCall(call: ModelToolCall, index: number) {
    return this.delta({ tool_calls: [{ index, ...presentToolCall(call) }] });
  }

  /** The last chunk with a choice: the finish reason. */
  finish(outcome: Pick<CompletionOutcome, 'toolCalls' | 'finishReason'>) {
    return this.delta({}, finishReasonOf(outcome));
  }

  /** The usage chunk (no choices), or none without `include_usage`. */
  usage(usage: ChatUsage) {
    return this.includeUsage ? this.chunk([], usage) : null;
  }
}

/** Float32 little-endian bytes of a vector, base64 (OpenAI's `encoding_format: base64`). */
export function base64Vector(vector: number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, i) => bytes.writeFloatLE(value, i * 4));
  return bytes.toString('base64');
}

export function presentEmbeddings(
  model: string,
  vectors: number[][],
  tokens: number,
  encoding: 'float' | 'base64',
): Schemas['EmbeddingResponse'] {
  return {
    object: 'list',
    data: vectors.map((vector, index) => ({
      object: 'embedding',
      index,
      embedding: encoding === 'base64' ? base64Vector(vector) : vector,
    })),
    model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}
