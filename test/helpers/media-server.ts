import type http from 'node:http';
import { encodePng, encodeWav } from '../../src/platform/ai/development-files';
import { developmentPicture } from '../../src/platform/ai/development-image';

/**
 * The OpenAI media APIs as a local test server speaks them (part of the fake model server):
 * `POST /v1/images/generations` (JSON, `b64_json` images with token usage), `POST /v1/images/edits`
 * (multipart, `image[]` files), `POST /v1/audio/transcriptions` (multipart; `verbose_json` with
 * segments, or `json`) and `POST /v1/audio/speech` (JSON in, binary audio out).
 */
export type MediaBehaviour = { kind: 'ok' } | { kind: 'error'; status: number; message: string } | { kind: 'hang' };

export interface MediaState {
  behaviour: MediaBehaviour;
  /** The images answered, in order (to compare with what the service stored). */
  images: Buffer[];
  /** The audio files answered by `/v1/audio/speech`, in order. */
  speech: Buffer[];
  /** The requests received: path, fields, and the files of multipart requests. */
  requests: Array<{
    path: string;
    fields: Record<string, string | string[]>;
    files: Array<{ name: string; filename: string; type: string; bytes: Buffer }>;
    authorization?: string;
  }>;
  /** The transcript `/v1/audio/transcriptions` answers. */
  transcript: { text: string; language: string; duration: number; segments: Array<{ text: string; start: number; end: number }> };
  /** The token usage images answers carry (gpt-image models report it). */
  imageUsage: { input_tokens: number; output_tokens: number } | null;
}

export function newMediaState(): MediaState {
  return {
    behaviour: { kind: 'ok' },
    images: [],
    speech: [],
    requests: [],
    transcript: {
      text: 'Hello there. This is a test.',
      language: 'english',
      duration: 2.5,
      segments: [
        { text: ' Hello there.', start: 0, end: 1.2 },
        { text: ' This is a test.', start: 1.2, end: 2.5 },
      ],
    },
    imageUsage: { input_tokens: 12, output_tokens: 272 },
  };
}

interface Part {
  name: string;
  filename?: string;
  type: string;
  bytes: Buffer;
}

/** The parts of a multipart/form-data body. */
function multipart(contentType: string, body: Buffer): Part[] {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType);
  if (!boundary) return [];
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  const parts: Part[] = [];
  let at = body.indexOf(delimiter);
  while (at !== -1) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    const next = body.indexOf(delimiter, start);
    if (next === -1) break;
    const part = body.subarray(start + 2, next - 2); // after CRLF, before CRLF
    const split = part.indexOf('\r\n\r\n');
    const head = part.subarray(0, split).toString('utf8');
    const name = /name="([^"]*)"/.exec(head)?.[1] ?? '';
    const filename = /filename="([^"]*)"/.exec(head)?.[1];
    const type = /content-type:\s*([^\r\n]+)/i.exec(head)?.[1] ?? 'text/plain';
    parts.push({ name, filename, type, bytes: part.subarray(split + 4) });
    at = next;
  }
  return parts;
}

/** A small MP3: an ID3v2 header and silent MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz). */
export function silentMp3(frames = 4): Buffer {
  const id3 = Buffer.from([0x49, 0x44, 0x33, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]);
  const frame = Buffer.alloc(417);
  Buffer.from([0xff, 0xfb, 0x90, 0x64]).copy(frame);
  return Buffer.concat([id3, ...Array.from({ length: frames }, () => frame)]);
}

/** Answers a media request of the OpenAI API; false when `req` is not one. */
export function handleMedia(state: MediaState, req: http.IncomingMessage, body: Buffer, res: http.ServerResponse): boolean {
  const path = req.url ?? '';
  if (
    req.method !== 'POST' ||
    !['/v1/images/generations', '/v1/images/edits', '/v1/audio/transcriptions', '/v1/audio/speech'].includes(path)
  )
    return false;
  const contentType = req.headers['content-type'] ?? '';
  const fields: Record<string, string | string[]> = {};
  const files: MediaState['requests'][number]['files'] = [];
  if (contentType.startsWith('multipart/form-data')) {
    for (const part of multipart(contentType, body)) {
      if (part.filename !== undefined) files.push({ name: part.name, filename: part.filename, type: part.type, bytes: part.bytes });
      else {
        const value = part.bytes.toString('utf8');
        const previous = fields[part.name];
        fields[part.name] = previous === undefined ? value : [...(Array.isArray(previous) ? previous : [previous]), value];
      }
    }
  } else {
    for (const [key, value] of Object.entries(JSON.parse(body.toString('utf8') || '{}') as Record<string, unknown>))
      fields[key] = String(value);
  }
  state.requests.push({ path, fields, files, authorization: req.headers.authorization });
  const behaviour = state.behaviour;
  if (behaviour.kind === 'hang') return true;
  if (behaviour.kind === 'error') {
    res
      .writeHead(behaviour.status, { 'content-type': 'application/json' })
      .end(JSON.stringify({ error: { message: behaviour.message, type: 'server_error' } }));
    return true;
  }
  const json = (value: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value));
  if (path.startsWith('/v1/images/')) {
    const n = Number(fields.n ?? 1);
    const input = files.map((f) => f.bytes.toString('base64')).join();
    const images = Array.from({ length: n }, (_, i) =>
      encodePng(8, 8, developmentPicture(`fake:${String(fields.prompt)}:${input}:${i}`, 8, 8), { Software: 'the test server' }),
    );
    state.images.push(...images);
    json({
      created: 1763784000,
      data: images.map((image) => ({ b64_json: image.toString('base64') })),
      ...(state.imageUsage
        ? { usage: { ...state.imageUsage, total_tokens: state.imageUsage.input_tokens + state.imageUsage.output_tokens } }
        : {}),
    });
    return true;
  }
  if (path === '/v1/audio/transcriptions') {
    const { text, language, duration, segments } = state.transcript;
    if (fields.response_format !== 'verbose_json') {
      json({ text, usage: { type: 'duration', seconds: Math.ceil(duration) } });
      return true;
    }
    json({
      task: 'transcribe',
      language,
      duration,
      text,
      segments: segments.map((s, id) => ({
        id,
        seek: 0,
        start: s.start,
        end: s.end,
        text: s.text,
        tokens: [1, 2, 3],
        temperature: 0,
        avg_logprob: -0.2,
        compression_ratio: 1.1,
        no_speech_prob: 0.01,
      })),
      usage: { type: 'duration', seconds: Math.ceil(duration) },
    });
    return true;
  }
  // Speech: the format asked for (WAV, or MP3 for any other).
  const wav = fields.response_format === 'wav';
  const audio = wav ? encodeWav(Int16Array.from({ length: 800 }, (_, i) => Math.round(8000 * Math.sin(i / 3)))) : silentMp3();
  state.speech.push(audio);
  res.writeHead(200, { 'content-type': wav ? 'audio/wav' : 'audio/mpeg' }).end(audio);
  return true;
}
