/**
 * An OpenAI chat completion request as the service's model call takes it: the messages as
 * `ChatMessage`s, the client's tools as `ToolSpec`s with its tool choice, and the sampling
 * settings; with the named checks the document states beyond its schemas (`n`, tool messages
 * answering a call, images as `data:` URLs or `http(s)` URLs to read before the call).
 */
import type { CallSettings, ChatMessage, ModelToolCall, ToolChoice, ToolSpec, UserContentPart } from '../../platform/ai/models';
import type { Schemas } from '../../platform/api-types';
import { type ErrorDetail, errors } from '../../platform/errors';
import { IMAGE_TYPES, type RemoteImage } from './images';

export type CompletionRequest = Schemas['ChatCompletionRequest'];
type RequestMessage = Schemas['ChatCompletionMessage'];
type TextContent = Schemas['ChatCompletionTextContent'];

/** What the model is asked: the prompt, the client's tools and choice, the settings. */
export interface ModelAsk {
  messages: ChatMessage[];
  tools: ToolSpec[];
  toolChoice?: ToolChoice;
  settings: CallSettings;
  /** Whether a user message carries an image (the model must read images). */
  hasImages: boolean;
  /** The images given by URL, whose parts are filled once they are read (RemoteImages). */
  remoteImages: RemoteImage[];
}
const DATA_URL = /^data:([a-z0-9.+-]+\/[a-z0-9.+-]+)(?:;[a-z0-9-]+=[^;,]*)*;base64,([A-Za-z0-9+/=\s]*)$/i;

/** Text content: the string, or its parts joined with newlines. */
const textOf = (content: TextContent | null | undefined): string =>
  content === null || content === undefined ? '' : typeof content === 'string' ? content : content.map((p) => p.text).join('\n');

/** A problem of the request, by the field it names (gathered, then answered as one 400). */
class Problems {
  readonly list: ErrorDetail[] = [];
  add(path: string, message: string): void {
    this.list.push({ path: `/body/${path}`, message });
  }
}

/**
 * An image part's `data:` URL as bytes and a media type; an `http(s)` URL as a part to fill once
 * read (added to `remote`); a problem otherwise.
 */
function imageOf(url: string, path: string, problems: Problems, remote: RemoteImage[]): UserContentPart | null {
  if (/^https?:\/\//i.test(url)) {
    const part = { type: 'image' as const, data: new Uint8Array(), mediaType: '', name: 'image' };
    remote.push({ url, path, part });
    return part;
  }
  const match = DATA_URL.exec(url);
  if (!match) {
    problems.add(path, 'must be a data: URL (base64) or an http(s) URL');
    return null;
  }
  const mediaType = (match[1] as string).toLowerCase();
  if (!IMAGE_TYPES.has(mediaType)) {
    problems.add(path, 'must be a PNG, JPEG, GIF or WebP image');
    return null;
  }
  const data = Buffer.from((match[2] as string).replace(/\s/g, ''), 'base64');
  if (data.byteLength === 0) {
    problems.add(path, 'holds no image');
    return null;
  }
  return { type: 'image', data: new Uint8Array(data), mediaType, name: `image.${mediaType.slice('image/'.length)}` };
}

/** A tool call's arguments as the model wrote them: the JSON parsed (an object), or `{}` with a problem. */
function argumentsOf(text: string, path: string, problems: Problems): Record<string, unknown> {
  if (text.trim() === '') return {};
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // Said below.
  }
  problems.add(path, 'must be a JSON object (as text)');
  return {};
}

/** The messages as the model call takes them; the tool calls they made, by id, to name the results. */
function messagesOf(
  messages: RequestMessage[],
  problems: Problems,
): { prompt: ChatMessage[]; hasImages: boolean; remoteImages: RemoteImage[] } {
  const prompt: ChatMessage[] = [];
  const remoteImages: RemoteImage[] = [];
  const calls = new Map<string, string>();
  let hasImages = false;
  messages.forEach((message, i) => {
    switch (message.role) {
      case 'system':
      case 'developer':
        prompt.push({ role: 'system', content: textOf(message.content) });
        break;
      case 'user': {
        if (typeof message.content === 'string') {
          prompt.push({ role: 'user', content: message.content });
          break;
        }
        const parts: UserContentPart[] = [];
        message.content.forEach((part, j) => {
          if (part.type === 'text') parts.push({ type: 'text', text: part.text });
          else {
            hasImages = true;
            const image = imageOf(part.image_url.url, `messages/${i}/content/${j}/image_url/url`, problems, remoteImages);
            if (image) parts.push(image);
          }
        });
        prompt.push({ role: 'user', content: parts });
        break;
      }
      case 'assistant': {
        const toolCalls: ModelToolCall[] = (message.tool_calls ?? []).map((call, j) => {
          calls.set(call.id, call.function.name);
          return {
            toolCallId: call.id,
            toolName: call.function.name,
            arguments: argumentsOf(call.function.arguments, `messages/${i}/tool_calls/${j}/function/arguments`, problems),
          };
        });
        prompt.push({ role: 'assistant', content: textOf(message.content), ...(toolCalls.length ? { toolCalls } : {}) });
        break;
      }
      case 'tool': {
        const toolName = calls.get(message.tool_call_id);
        if (toolName === undefined) problems.add(`messages/${i}/tool_call_id`, 'must name a tool call of an earlier assistant message');
        prompt.push({
          role: 'tool',
          content: textOf(message.content),
          toolCallId: message.tool_call_id,
          toolName: toolName ?? '',
          isError: false,
        });
        break;
      }
    }
  });
  return { prompt, hasImages, remoteImages };
}

/** The client's tools as the model is offered them (their schemas as given, an empty object schema by default). */
function toolsOf(request: CompletionRequest, problems: Problems): { tools: ToolSpec[]; toolChoice?: ToolChoice } {
  const tools = (request.tools ?? []).map((tool): ToolSpec => ({
    name: tool.function.name,
    description: tool.function.description ?? '',
    inputSchema: tool.function.parameters ?? { type: 'object', properties: {} },
  }));
  const names = new Set<string>();
  tools.forEach((tool, i) => {
    if (names.has(tool.name)) problems.add(`tools/${i}/function/name`, 'must differ from the other tools’ names');
    names.add(tool.name);
  });
  const choice = request.tool_choice;
  if (choice === undefined) return { tools };
  if (typeof choice === 'string') {
    if (choice === 'required' && tools.length === 0) problems.add('tool_choice', 'required needs tools');
    return { tools, toolChoice: choice };
  }
  if (!names.has(choice.function.name)) problems.add('tool_choice/function/name', 'must name one of the tools');
  return { tools, toolChoice: { toolName: choice.function.name } };
}

/** The sampling settings given (nulls are absent); the smaller token limit wins. */
function settingsOf(request: CompletionRequest): CallSettings {
  const limits = [request.max_tokens, request.max_completion_tokens].filter((n): n is number => typeof n === 'number');
  const stop = request.stop;
  const settings: CallSettings = {
    maxOutputTokens: limits.length ? Math.min(...limits) : undefined,
    temperature: request.temperature ?? undefined,
    topP: request.top_p ?? undefined,
    presencePenalty: request.presence_penalty ?? undefined,
    frequencyPenalty: request.frequency_penalty ?? undefined,
    seed: request.seed ?? undefined,
    stopSequences: stop === null || stop === undefined ? undefined : typeof stop === 'string' ? [stop] : stop,
  };
  return Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== undefined)) as CallSettings;
}

/** What the model is asked for `request`; `400 invalid_request` naming every problem. */
export function modelAsk(request: CompletionRequest): ModelAsk {
  const problems = new Problems();
  if (request.n !== undefined && request.n !== null && request.n !== 1) problems.add('n', 'must be 1 (this service answers one choice)');
  if (request.stream_options && !request.stream) problems.add('stream_options', 'is only taken with stream: true');
  const { prompt, hasImages, remoteImages } = messagesOf(request.messages, problems);
  const { tools, toolChoice } = toolsOf(request, problems);
  if (problems.list.length > 0) throw errors.invalidRequest('The request is not valid.', problems.list);
  return { messages: prompt, tools, toolChoice, settings: settingsOf(request), hasImages, remoteImages };
}
