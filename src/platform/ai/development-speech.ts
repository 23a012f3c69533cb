import { crc32, DEVELOPMENT_PROVIDER, encodeWav, SAMPLE_RATE } from './development-files';
import type { SpeechModelV3, TranscriptionModelV3 } from './media';

/**
 * Speech as tones, and back: the development speech model makes a WAV whose tones encode the text;
 * the development transcription model decodes exactly the audio that speech made, and says so of
 * any other audio.
 */

export const DEVELOPMENT_TRANSCRIPTION_MODEL = 'development-transcription';
export const DEVELOPMENT_SPEECH_MODEL = 'development-speech';

/** Samples per symbol (10 ms): one nibble per symbol, as one of 16 tones. */
const SYMBOL = 80;
/** Tone k is 600 + 100·k Hz: a whole number of cycles per symbol, so the tones are orthogonal. */
const toneHz = (k: number) => 600 + 100 * k;
const MAGIC = Buffer.from('DEVS', 'latin1');
const HEADER_BYTES = 8; // magic and the text's length in bytes

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
    provider: DEVELOPMENT_PROVIDER,
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
        response: { timestamp: new Date(), modelId: DEVELOPMENT_SPEECH_MODEL },
      };
    },
  };
}

/** The development transcription model: decodes its own speech exactly; says so of other audio. */
export function developmentTranscriptionModel(): TranscriptionModelV3 {
  return {
    specificationVersion: 'v3',
    provider: DEVELOPMENT_PROVIDER,
    modelId: DEVELOPMENT_TRANSCRIPTION_MODEL,
    async doGenerate(options) {
      options.abortSignal?.throwIfAborted();
      const audio = typeof options.audio === 'string' ? Buffer.from(options.audio, 'base64') : Buffer.from(options.audio);
      const language = (options.providerOptions?.development as { language?: unknown } | undefined)?.language;
      const hint = typeof language === 'string' ? language : undefined;
      const response = { timestamp: new Date(), modelId: DEVELOPMENT_TRANSCRIPTION_MODEL };
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
