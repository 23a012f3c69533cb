import type { ImageModel, SpeechModel, TranscriptionModel } from 'ai';

/** The AI SDK's media model interfaces (version 3), which every media model here implements. */
export type ImageModelV3 = Extract<ImageModel, { specificationVersion: 'v3' }>;
export type TranscriptionModelV3 = Extract<TranscriptionModel, { specificationVersion: 'v3' }>;
export type SpeechModelV3 = Extract<SpeechModel, { specificationVersion: 'v3' }>;

export type MediaKind = 'image' | 'transcription' | 'speech';

/** What a media call is priced by: images made, seconds of audio transcribed, characters spoken. */
export type MediaUnit = 'image' | 'second' | 'character';

export const UNIT_OF: Record<MediaKind, MediaUnit> = { image: 'image', transcription: 'second', speech: 'character' };

/** A media model a provider offers, with its price in millionths of a cent per unit. */
export interface MediaModelInfo {
  id: string;
  providerId: string;
  name: string;
  kind: MediaKind;
  microCentsPerUnit: number;
}

/** A configured media model: its id and its price per unit in millionths of a cent. */
export interface MediaModelPrice {
  id: string;
  microCentsPerUnit: number;
}

/** The media models of a provider, and how to reach each through the AI SDK. */
export interface MediaModels {
  readonly models: readonly MediaModelInfo[];
  image(id: string): Promise<ImageModelV3>;
  transcription(id: string): Promise<TranscriptionModelV3>;
  speech(id: string): Promise<SpeechModelV3>;
}

/** The models of an OpenAI-format API (images, transcriptions, speech), through `@ai-sdk/openai`. */
export class OpenAIMediaModels implements MediaModels {
  readonly models: readonly MediaModelInfo[];
  private sdk?: Promise<import('@ai-sdk/openai').OpenAIProvider>;

  constructor(
    private readonly options: { baseUrl: string; apiKey: string | null; providerId: string; fetch?: typeof fetch },
    models: { image: readonly MediaModelPrice[]; transcription: readonly MediaModelPrice[]; speech: readonly MediaModelPrice[] } = {
      image: [],
      transcription: [],
      speech: [],
    },
  ) {
    this.models = (['image', 'transcription', 'speech'] as const).flatMap((kind) =>
      models[kind].map((m) => ({ id: m.id, providerId: options.providerId, name: m.id, kind, microCentsPerUnit: m.microCentsPerUnit })),
    );
  }

  private provider() {
    this.sdk ??= import('@ai-sdk/openai').then(({ createOpenAI }) =>
      createOpenAI({ baseURL: this.options.baseUrl, apiKey: this.options.apiKey ?? '', fetch: this.options.fetch }),
    );
    return this.sdk;
  }

  async image(id: string) {
    return (await this.provider()).image(id);
  }

  async transcription(id: string) {
    return (await this.provider()).transcription(id);
  }

  async speech(id: string) {
    return (await this.provider()).speech(id);
  }
}

// ---- What a file is, by its bytes ----

const ascii = (bytes: Buffer, at: number, text: string) =>
  bytes.length >= at + text.length && bytes.toString('latin1', at, at + text.length) === text;

/** The audio type of `bytes` (WAV, MP3, OGG, FLAC, WebM, M4A, AAC), or null when it is not audio. */
export function audioType(bytes: Buffer): string | null {
  if (ascii(bytes, 0, 'RIFF') && ascii(bytes, 8, 'WAVE')) return 'audio/wav';
  if (ascii(bytes, 0, 'ID3')) return 'audio/mpeg';
  if (ascii(bytes, 0, 'OggS')) return 'audio/ogg';
  if (ascii(bytes, 0, 'fLaC')) return 'audio/flac';
  if (bytes.length >= 4 && bytes.readUInt32BE(0) === 0x1a45dfa3) return 'audio/webm';
  if (ascii(bytes, 4, 'ftyp')) return 'audio/mp4';
  if (bytes.length >= 2 && bytes[0] === 0xff) {
    const second = bytes[1] as number;
    if ((second & 0xf6) === 0xf0) return 'audio/aac'; // ADTS
    if ((second & 0xe0) === 0xe0 && (second & 0x06) !== 0) return 'audio/mpeg'; // an MPEG audio frame
  }
  return null;
}

/** The image type of `bytes` (PNG, JPEG, GIF, WebP), or null when it is not one of them. */
export function imageType(bytes: Buffer): string | null {
  if (bytes.length >= 8 && bytes.readUInt32BE(0) === 0x89504e47 && bytes.readUInt32BE(4) === 0x0d0a1a0a) return 'image/png';
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (ascii(bytes, 0, 'GIF87a') || ascii(bytes, 0, 'GIF89a')) return 'image/gif';
  if (ascii(bytes, 0, 'RIFF') && ascii(bytes, 8, 'WEBP')) return 'image/webp';
  return null;
}

/** The file name extension of a media type the service stores. */
export function extensionOf(mediaType: string): string {
  const known: Record<string, string> = {
    'image/png': 'png',
    'image/jpeg': 'jpg',
    'image/gif': 'gif',
    'image/webp': 'webp',
    'audio/wav': 'wav',
    'audio/mpeg': 'mp3',
    'audio/mp3': 'mp3',
    'audio/ogg': 'ogg',
    'audio/flac': 'flac',
    'audio/aac': 'aac',
    'audio/webm': 'webm',
    'audio/mp4': 'm4a',
    'audio/pcm': 'pcm',
  };
  return known[mediaType] ?? 'bin';
}
