import { describeProviderError, errorDetail, type FailureLog } from './models';
import { audioType, type ImageModelV3, type SpeechModelV3, type TranscriptionModelV3 } from './media';

/**
 * The media calls, through the AI SDK's image, transcription and speech functions, each bounded by
 * the deployment's timeout; a provider's failure becomes a MediaFailure fit for the caller.
 */

/** A media call failed at the provider (`timeout`: it did not finish in time and was aborted). */
export class MediaFailure extends Error {
  override name = 'MediaFailure';
  constructor(
    readonly code: 'model_provider_error' | 'model_provider_timeout',
    message: string,
    readonly detail: string = message,
  ) {
    super(message);
  }
}

/** How long a call may take, and what a caller is told of a failure (never an address or a key). */
export interface MediaCallSettings {
  timeoutMs: number;
  describe?: (error: unknown) => string;
  log?: FailureLog;
}

// The AI SDK prints the models' warnings to the console unless told not to; they are answered instead.
(globalThis as { AI_SDK_LOG_WARNINGS?: unknown }).AI_SDK_LOG_WARNINGS ??= false;

/** Runs one call of the AI SDK with the deployment's timeout; its failures become MediaFailure. */
async function call<T>(settings: MediaCallSettings, model: string, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const signal = AbortSignal.timeout(settings.timeoutMs);
  try {
    return await run(signal);
  } catch (error) {
    const failure = signal.aborted
      ? new MediaFailure('model_provider_timeout', `The model provider did not finish within ${settings.timeoutMs} ms.`, errorDetail(error))
      : new MediaFailure(
          'model_provider_error',
          noResult(error) ?? (settings.describe ?? describeProviderError)(error),
          errorDetail(error),
        );
    settings.log?.('media model failed', { model, error: failure.message, detail: failure.detail });
    throw failure;
  }
}

/** The AI SDK's own word that a model answered without a result. */
function noResult(error: unknown): string | null {
  const name = (error as { name?: unknown } | null)?.name;
  if (name === 'AI_NoImageGeneratedError') return 'The model provider returned no image.';
  if (name === 'AI_NoTranscriptGeneratedError') return 'The model provider returned no transcript.';
  if (name === 'AI_NoSpeechGeneratedError') return 'The model provider returned no audio.';
  return null;
}

const warningText = (w: { type: string; feature?: string; details?: string; message?: string; setting?: string }): string =>
  w.details ??
  w.message ??
  ((w.feature ?? w.setting) ? `The model does not support ${w.feature ?? w.setting}.` : `The model warned: ${w.type}.`);

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

export interface GeneratedImages {
  images: Array<{ bytes: Buffer; mediaType: string }>;
  usage: TokenUsage;
  warnings: string[];
}

export interface ImageRequest {
  prompt: string;
  count: number;
  size?: `${number}x${number}`;
  aspectRatio?: `${number}:${number}`;
  /** The image to edit. */
  input?: { bytes: Buffer; mediaType: string };
}

/** Images from the AI SDK's `generateImage` (an edit with the input image as the prompt's image). */
export async function generateImages(model: ImageModelV3, request: ImageRequest, settings: MediaCallSettings): Promise<GeneratedImages> {
  const { generateImage } = await import('ai');
  const result = await call(settings, model.modelId, (abortSignal) =>
    generateImage({
      model,
      prompt: request.input ? { text: request.prompt, images: [new Uint8Array(request.input.bytes)] } : request.prompt,
      n: request.count,
      size: request.size,
      aspectRatio: request.aspectRatio,
      maxRetries: 0,
      abortSignal,
    }),
  );
  return {
    images: result.images.map((image) => ({ bytes: Buffer.from(image.uint8Array), mediaType: image.mediaType })),
    usage: { inputTokens: result.usage?.inputTokens ?? 0, outputTokens: result.usage?.outputTokens ?? 0 },
    warnings: result.warnings.map(warningText),
  };
}

export interface Transcript {
  text: string;
  segments: Array<{ text: string; startSecond: number; endSecond: number }>;
  language: string | null;
  durationSeconds: number | null;
  warnings: string[];
}

/** A transcript from the AI SDK's `transcribe`, asking OpenAI-format APIs for timed segments. */
export async function transcribeAudio(
  model: TranscriptionModelV3,
  audio: Buffer,
  language: string | undefined,
  settings: MediaCallSettings,
): Promise<Transcript> {
  const { experimental_transcribe: transcribe } = await import('ai');
  const hint = language === undefined ? {} : { language };
  const result = await call(settings, model.modelId, (abortSignal) =>
    transcribe({
      model,
      audio: new Uint8Array(audio),
      // OpenAI's options make it answer `verbose_json`, with segments.
      providerOptions: { openai: { ...hint, timestampGranularities: ['segment'] }, development: hint },
      maxRetries: 0,
      abortSignal,
    }),
  );
  return {
    text: result.text,
    segments: result.segments.map((s) => ({ text: s.text, startSecond: s.startSecond, endSecond: s.endSecond })),
    language: result.language ?? null,
    durationSeconds: result.durationInSeconds ?? null,
    warnings: result.warnings.map(warningText),
  };
}

export interface SpeechRequest {
  text: string;
  voice: string;
  format: string;
  speed?: number;
}

/** Audio from the AI SDK's `generateSpeech`; its media type is read from the bytes. */
export async function speak(
  model: SpeechModelV3,
  request: SpeechRequest,
  settings: MediaCallSettings,
): Promise<{ bytes: Buffer; mediaType: string; warnings: string[] }> {
  const { experimental_generateSpeech: generateSpeech } = await import('ai');
  const result = await call(settings, model.modelId, (abortSignal) =>
    generateSpeech({
      model,
      text: request.text,
      voice: request.voice,
      outputFormat: request.format,
      speed: request.speed,
      maxRetries: 0,
      abortSignal,
    }),
  );
  const bytes = Buffer.from(result.audio.uint8Array);
  return { bytes, mediaType: audioType(bytes) ?? mediaTypeOfFormat(request.format), warnings: result.warnings.map(warningText) };
}

/** What an asked-for format is, when the bytes do not say (raw PCM has no header). */
function mediaTypeOfFormat(format: string): string {
  return (
    { mp3: 'audio/mpeg', wav: 'audio/wav', opus: 'audio/ogg', aac: 'audio/aac', flac: 'audio/flac', pcm: 'audio/pcm' }[format] ??
    'application/octet-stream'
  );
}
