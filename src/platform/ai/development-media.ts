import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import type { ImageModelV3, MediaModelInfo, MediaModels, SpeechModelV3, TranscriptionModelV3 } from './media';

/**
 * The development provider's media models: real files, made offline and deterministically, that
 * say they are the development provider's. Images are PNGs whose pattern follows from the prompt
 * (and the input image of an edit); speech is a WAV whose tones encode the text; transcription
 * decodes exactly the audio that speech made, and says so of any other audio.
 */

export const DEVELOPMENT_IMAGE_MODEL = 'development-image';
export const DEVELOPMENT_TRANSCRIPTION_MODEL = 'development-transcription';
export const DEVELOPMENT_SPEECH_MODEL = 'development-speech';

const PROVIDER = 'builtin-development';
const SIGNATURE = 'Made by the development provider (deterministic, not an AI)';

// ---- CRC-32 (PNG chunks, and the check of the encoded speech) ----

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

export function crc32(data: Uint8Array): number {
  let c = 0xffffffff;
  for (const byte of data) c = (CRC_TABLE[(c ^ byte) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// ---- PNG ----

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** An 8-bit RGB PNG of `rgb` (width × height × 3 bytes, row by row), with `tEXt` entries (Latin-1). */
export function encodePng(width: number, height: number, rgb: Buffer, text: Record<string, string> = {}): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // colour type: RGB
  const rows = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y += 1) rgb.copy(rows, y * (width * 3 + 1) + 1, y * width * 3, (y + 1) * width * 3); // filter byte 0: none
  const texts = Object.entries(text).map(([key, value]) =>
    pngChunk('tEXt', Buffer.from(`${key}\0${value.replace(/[^\x20-\x7e]/g, '?')}`, 'latin1')),
  );
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', header),
    ...texts,
    pngChunk('IDAT', deflateSync(rows)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** `length` bytes derived from `seed` (SHA-256 in counter mode). */
function stream(seed: string, length: number): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; parts.length * 32 < length; i += 1) parts.push(createHash('sha256').update(`${seed}:${i}`).digest());
  return Buffer.concat(parts).subarray(0, length);
}

const DEFAULT_SIDE = 256;
const MIN_SIDE = 16;
const MAX_SIDE = 1024;

/** The width and height for a `WxH` size or a `W:H` ratio (longest side 512), clamped to 16–1024. */
export function developmentImageSize(size?: string, aspectRatio?: string): { width: number; height: number; clamped: boolean } {
  let width = DEFAULT_SIDE;
  let height = DEFAULT_SIDE;
  if (size) [width, height] = size.split('x').map(Number) as [number, number];
  else if (aspectRatio) {
    const [w, h] = aspectRatio.split(':').map(Number) as [number, number];
    const scale = 512 / Math.max(w, h);
    width = Math.round(w * scale);
    height = Math.round(h * scale);
  }
  const clamp = (v: number) => Math.min(MAX_SIDE, Math.max(MIN_SIDE, v));
  return { width: clamp(width), height: clamp(height), clamped: clamp(width) !== width || clamp(height) !== height };
}

/**
 * A picture that follows from `seed`: a diagonal gradient between two of its colours under a grid
 * of tiles in two more, each tile's colour and shade chosen by the seed.
 */
export function developmentPicture(seed: string, width: number, height: number): Buffer {
  const bytes = stream(seed, 12 + 64);
  const colour = (i: number) => [bytes[i * 3] as number, bytes[i * 3 + 1] as number, bytes[i * 3 + 2] as number];
  const palette = [colour(0), colour(1), colour(2), colour(3)];
  const rgb = Buffer.alloc(width * height * 3);
  const tile = Math.max(4, Math.floor(Math.min(width, height) / 8));
  for (let y = 0; y < height; y += 1) {
    for (let x = 0; x < width; x += 1) {
      const t = (x + y) / (width + height);
      const cell = (bytes[12 + ((Math.floor(y / tile) * 8 + Math.floor(x / tile)) % 64)] as number) ?? 0;
      const inset = x % tile > 0 && y % tile > 0 && cell % 3 === 0;
      const base = inset ? (palette[2 + (cell & 1)] as number[]) : null;
      for (let c = 0; c < 3; c += 1) {
        const gradient = (palette[0]![c] as number) * (1 - t) + (palette[1]![c] as number) * t;
        rgb[(y * width + x) * 3 + c] = Math.round(base ? ((base[c] as number) * 3 + gradient) / 4 : gradient);
      }
    }
  }
  return rgb;
}

const now = () => new Date();

/** The development image model: `n` PNGs from the prompt (and the input image of an edit). */
export function developmentImageModel(): ImageModelV3 {
  return {
    specificationVersion: 'v3',
    provider: PROVIDER,
    modelId: DEVELOPMENT_IMAGE_MODEL,
    maxImagesPerCall: 4,
    async doGenerate(options) {
      options.abortSignal?.throwIfAborted();
      const warnings: Array<{ type: 'unsupported'; feature: string; details?: string }> = [];
      const { width, height, clamped } = developmentImageSize(options.size, options.aspectRatio);
      if (clamped)
        warnings.push({
          type: 'unsupported',
          feature: 'size',
          details: `The development model makes images of 16 to 1024 pixels a side: ${width}x${height}.`,
        });
      if (options.seed !== undefined) warnings.push({ type: 'unsupported', feature: 'seed' });
      // An edit depends on the input image's bytes too.
      const input = (options.files ?? []).map((file) =>
        file.type === 'file'
          ? createHash('sha256')
              .update(typeof file.data === 'string' ? Buffer.from(file.data, 'base64') : file.data)
              .digest('hex')
          : file.url,
      );
      const images = Array.from({ length: options.n }, (_, i) => {
        const seed = JSON.stringify([options.prompt ?? '', input, width, height, i]);
        return new Uint8Array(
          encodePng(width, height, developmentPicture(seed, width, height), {
            Software: SIGNATURE,
            Description: (options.prompt ?? '').slice(0, 1000),
          }),
        );
      });
      return { images, warnings, response: { timestamp: now(), modelId: DEVELOPMENT_IMAGE_MODEL, headers: undefined } };
    },
  };
}

// ---- Speech as tones, and back ----

const SAMPLE_RATE = 8000;
/** Samples per symbol (10 ms): one nibble per symbol, as one of 16 tones. */
const SYMBOL = 80;
/** Tone k is 600 + 100·k Hz: a whole number of cycles per symbol, so the tones are orthogonal. */
const toneHz = (k: number) => 600 + 100 * k;
const MAGIC = Buffer.from('DEVS', 'latin1');
const HEADER_BYTES = 8; // magic and the text's length in bytes

/** A WAV file (PCM, 16-bit, mono) of `samples`. */
export function encodeWav(samples: Int16Array, sampleRate = SAMPLE_RATE): Buffer {
  const data = Buffer.alloc(samples.length * 2);
  samples.forEach((s, i) => data.writeInt16LE(s, i * 2));
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVE', 8, 'latin1');
  header.write('fmt ', 12, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

/** The bytes the development speech encodes: magic, length, the text's UTF-8, its CRC-32. */
function frame(text: string): Buffer {
  const body = Buffer.from(text, 'utf8');
  const head = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(head, 0);
  head.writeUInt32BE(body.length, 4);
  const check = Buffer.alloc(4);
  check.writeUInt32BE(crc32(body), 0);
  return Buffer.concat([head, body, check]);
}

/** The development speech of `text`: a WAV whose 10 ms tones are the nibbles of its framed bytes. */
export function developmentSpeech(text: string): Buffer {
  const bytes = frame(text);
  const samples = new Int16Array(bytes.length * 2 * SYMBOL);
  let symbol = 0;
  for (const byte of bytes) {
    for (const nibble of [byte >> 4, byte & 0x0f]) {
      const hz = toneHz(nibble);
      for (let i = 0; i < SYMBOL; i += 1)
        samples[symbol * SYMBOL + i] = Math.round(12_000 * Math.sin((2 * Math.PI * hz * i) / SAMPLE_RATE));
      symbol += 1;
    }
  }
  return encodeWav(samples);
}

/** The PCM samples of a 16-bit mono WAV at the development rate, or null for any other audio. */
function developmentPcm(audio: Buffer): Int16Array | null {
  if (audio.length < 12 || audio.toString('latin1', 0, 4) !== 'RIFF' || audio.toString('latin1', 8, 12) !== 'WAVE') return null;
  let format: { pcm: boolean; channels: number; rate: number; bits: number } | null = null;
  for (let at = 12; at + 8 <= audio.length;) {
    const id = audio.toString('latin1', at, at + 4);
    const size = audio.readUInt32LE(at + 4);
    if (id === 'fmt ' && size >= 16 && at + 24 <= audio.length) {
      format = {
        pcm: audio.readUInt16LE(at + 8) === 1,
        channels: audio.readUInt16LE(at + 10),
        rate: audio.readUInt32LE(at + 12),
        bits: audio.readUInt16LE(at + 22),
      };
    }
    if (id === 'data') {
      if (!format || !format.pcm || format.channels !== 1 || format.rate !== SAMPLE_RATE || format.bits !== 16) return null;
      const data = audio.subarray(at + 8, Math.min(audio.length, at + 8 + size));
      const samples = new Int16Array(Math.floor(data.length / 2));
      for (let i = 0; i < samples.length; i += 1) samples[i] = data.readInt16LE(i * 2);
      return samples;
    }
    at += 8 + size + (size % 2);
  }
  return null;
}

/** Goertzel: the strongest of the 16 tones in one symbol, or -1 when the symbol is silence. */
function nibbleAt(samples: Int16Array, symbol: number): number {
  let best = -1;
  let bestPower = 0;
  for (let k = 0; k < 16; k += 1) {
    const coefficient = 2 * Math.cos((2 * Math.PI * toneHz(k)) / SAMPLE_RATE);
    let s1 = 0;
    let s2 = 0;
    for (let i = 0; i < SYMBOL; i += 1) {
      const s = (samples[symbol * SYMBOL + i] as number) + coefficient * s1 - s2;
      s2 = s1;
      s1 = s;
    }
    const power = s1 * s1 + s2 * s2 - coefficient * s1 * s2;
    if (power > bestPower) {
      bestPower = power;
      best = k;
    }
  }
  return bestPower > 1e6 ? best : -1;
}

function bytesAt(samples: Int16Array, firstByte: number, count: number): Buffer | null {
  const out = Buffer.alloc(count);
  for (let i = 0; i < count; i += 1) {
    const hi = nibbleAt(samples, (firstByte + i) * 2);
    const lo = nibbleAt(samples, (firstByte + i) * 2 + 1);
    if (hi < 0 || lo < 0) return null;
    out[i] = (hi << 4) | lo;
  }
  return out;
}

export interface DecodedSpeech {
  text: string;
  /** Where each byte of the text's UTF-8 starts, in seconds. */
  secondsAt: (byteOffset: number) => number;
  durationSeconds: number;
}

/** The text the development speech encoded in `audio`, or null when it did not make it. */
export function decodeDevelopmentSpeech(audio: Buffer): DecodedSpeech | null {
  const samples = developmentPcm(audio);
  if (!samples) return null;
  const symbols = Math.floor(samples.length / SYMBOL);
  if (symbols < (HEADER_BYTES + 4) * 2) return null;
  const head = bytesAt(samples, 0, HEADER_BYTES);
  if (!head || !head.subarray(0, 4).equals(MAGIC)) return null;
  const length = head.readUInt32BE(4);
  if ((HEADER_BYTES + length + 4) * 2 > symbols) return null;
  const body = bytesAt(samples, HEADER_BYTES, length + 4);
  if (!body || body.readUInt32BE(length) !== crc32(body.subarray(0, length))) return null;
  const text = body.subarray(0, length).toString('utf8');
  const secondsPerByte = (2 * SYMBOL) / SAMPLE_RATE;
  return { text, secondsAt: (offset) => (HEADER_BYTES + offset) * secondsPerByte, durationSeconds: samples.length / SAMPLE_RATE };
}

/** What the development transcription says of audio its speech model did not make. */
export const FOREIGN_AUDIO_TRANSCRIPT =
  '[The development provider transcribes only the audio its own speech model made; this audio was not made by it, so its words are unknown.]';

/** Sentences of `text`, with their UTF-8 byte offsets. */
function sentences(text: string): Array<{ text: string; start: number; end: number }> {
  const out: Array<{ text: string; start: number; end: number }> = [];
  let offset = 0;
  for (const piece of text.match(/[^.!?\n]+[.!?]*\s*|\n+/g) ?? []) {
    const bytes = Buffer.byteLength(piece, 'utf8');
    if (piece.trim() !== '') out.push({ text: piece.trim(), start: offset, end: offset + Buffer.byteLength(piece.trimEnd(), 'utf8') });
    offset += bytes;
  }
  return out;
}

/** The development speech model: a WAV of tones for any voice and format (with a warning for others). */
export function developmentSpeechModel(): SpeechModelV3 {
  return {
    specificationVersion: 'v3',
    provider: PROVIDER,
    modelId: DEVELOPMENT_SPEECH_MODEL,
    async doGenerate(options) {
      options.abortSignal?.throwIfAborted();
      const warnings: Array<{ type: 'unsupported'; feature: string; details?: string }> = [];
      if (options.outputFormat !== undefined && options.outputFormat !== 'wav') {
        warnings.push({
          type: 'unsupported',
          feature: 'outputFormat',
          details: `The development speech model makes WAV only, not ${options.outputFormat}.`,
        });
      }
      if (options.speed !== undefined && options.speed !== 1) warnings.push({ type: 'unsupported', feature: 'speed' });
      return {
        audio: new Uint8Array(developmentSpeech(options.text)),
        warnings,
        response: { timestamp: now(), modelId: DEVELOPMENT_SPEECH_MODEL },
      };
    },
  };
}

/** The development transcription model: decodes its own speech exactly; says so of other audio. */
export function developmentTranscriptionModel(): TranscriptionModelV3 {
  return {
    specificationVersion: 'v3',
    provider: PROVIDER,
    modelId: DEVELOPMENT_TRANSCRIPTION_MODEL,
    async doGenerate(options) {
      options.abortSignal?.throwIfAborted();
      const audio = typeof options.audio === 'string' ? Buffer.from(options.audio, 'base64') : Buffer.from(options.audio);
      const language = (options.providerOptions?.development as { language?: unknown } | undefined)?.language;
      const hint = typeof language === 'string' ? language : undefined;
      const response = { timestamp: now(), modelId: DEVELOPMENT_TRANSCRIPTION_MODEL };
      const decoded = decodeDevelopmentSpeech(audio);
      if (!decoded) {
        return { text: FOREIGN_AUDIO_TRANSCRIPT, segments: [], language: undefined, durationInSeconds: undefined, warnings: [], response };
      }
      const segments = sentences(decoded.text).map((s) => ({
        text: s.text,
        startSecond: decoded.secondsAt(s.start),
        endSecond: decoded.secondsAt(s.end),
      }));
      return { text: decoded.text, segments, language: hint, durationInSeconds: decoded.durationSeconds, warnings: [], response };
    },
  };
}

/** The development provider's media models, free of charge. */
export class DevelopmentMediaModels implements MediaModels {
  readonly models: readonly MediaModelInfo[] = [
    {
      id: DEVELOPMENT_IMAGE_MODEL,
      providerId: PROVIDER,
      name: 'Development image model (deterministic PNG, not an AI)',
      kind: 'image',
      microCentsPerUnit: 0,
    },
    {
      id: DEVELOPMENT_TRANSCRIPTION_MODEL,
      providerId: PROVIDER,
      name: 'Development transcription model (decodes development speech, not an AI)',
      kind: 'transcription',
      microCentsPerUnit: 0,
    },
    {
      id: DEVELOPMENT_SPEECH_MODEL,
      providerId: PROVIDER,
      name: 'Development speech model (text as tones in a WAV, not an AI)',
      kind: 'speech',
      microCentsPerUnit: 0,
    },
  ];

  private known(id: string, wanted: string): void {
    if (id !== wanted) throw new Error(`the development provider has no model ${id}`);
  }

  async image(id: string) {
    this.known(id, DEVELOPMENT_IMAGE_MODEL);
    return developmentImageModel();
  }

  async transcription(id: string) {
    this.known(id, DEVELOPMENT_TRANSCRIPTION_MODEL);
    return developmentTranscriptionModel();
  }

  async speech(id: string) {
    this.known(id, DEVELOPMENT_SPEECH_MODEL);
    return developmentSpeechModel();
  }
}
