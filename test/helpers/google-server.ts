import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One answer of `generateContent`: text, then function calls. */
export interface GoogleAnswer {
  chunks: string[];
  functionCalls?: Array<{ name: string; args: Record<string, unknown> }>;
  usage?: { prompt: number; candidates: number };
}

/** A `generateContent` request as the fake received it (the fields the tests read). */
export interface GoogleRequestBody {
  contents?: Array<{ role: string; parts: Array<Record<string, unknown>> }>;
  systemInstruction?: { parts: Array<{ text: string }> };
  tools?: Array<{ functionDeclarations?: Array<{ name: string; description?: string; parameters?: Record<string, unknown> }> }>;
}

export interface FakeGoogleServer {
  /** The base URL of its Gemini API (`…/v1beta`). */
  baseUrl: string;
  /** The key it accepts in `x-goog-api-key`; any other is answered 400 with the key echoed, as the API does. */
  apiKey: string;
  /** The model ids `GET /v1beta/models` lists (as `models/<id>`). */
  models: string[];
  /** The answers of the next requests, taken in order; when none is left, a fixed reply. */
  script: GoogleAnswer[];
  requests: Array<{ path: string; model: string | null; stream: boolean; body: GoogleRequestBody | null; apiKey?: string }>;
  close(): Promise<void>;
}

const DEFAULT_ANSWER: GoogleAnswer = { chunks: ['Hello', ' from', ' Gemini.'], usage: { prompt: 11, candidates: 5 } };

/**
 * A local server speaking Google's Gemini API (Generative Language, v1beta): `GET /v1beta/models`,
 * and `POST /v1beta/models/<id>:generateContent` (one JSON answer) or
 * `:streamGenerateContent?alt=sse` (server-sent events, one `GenerateContentResponse` per chunk of
 * text, the function calls whole in the last one with the finish reason and the usage, as the API
 * streams them).
 */
export async function startFakeGoogle(apiKey: string): Promise<FakeGoogleServer> {
  const fake: FakeGoogleServer = {
    baseUrl: '',
    apiKey,
    models: ['gemini-2.5-flash'],
    script: [],
    requests: [],
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const text = Buffer.concat(parts).toString('utf8');
      const url = new URL(req.url ?? '/', 'http://localhost');
      const presented = req.headers['x-goog-api-key'] as string | undefined;
      const call = /^\/v1beta\/models\/([^:/]+):(generateContent|streamGenerateContent)$/.exec(url.pathname);
      fake.requests.push({
        path: url.pathname,
        model: call?.[1] ?? null,
        stream: call?.[2] === 'streamGenerateContent',
        body: text ? JSON.parse(text) : null,
        apiKey: presented,
      });
      const json = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (presented !== fake.apiKey) {
        json(400, { error: { code: 400, message: `API key not valid: ${presented ?? ''}`, status: 'INVALID_ARGUMENT' } });
        return;
      }
      if (url.pathname === '/v1beta/models' && req.method === 'GET') {
        json(200, {
          models: fake.models.map((id) => ({
            name: `models/${id}`,
            displayName: id,
            inputTokenLimit: 1_048_576,
            supportedGenerationMethods: ['generateContent'],
          })),
        });
        return;
      }
      if (!call || req.method !== 'POST') {
        json(404, { error: { code: 404, message: 'Not found', status: 'NOT_FOUND' } });
        return;
      }
      const answer = fake.script.shift() ?? DEFAULT_ANSWER;
      const usage = answer.usage ?? { prompt: 10, candidates: 5 };
      const usageMetadata = {
        promptTokenCount: usage.prompt,
        candidatesTokenCount: usage.candidates,
        totalTokenCount: usage.prompt + usage.candidates,
      };
      const calls = (answer.functionCalls ?? []).map((c) => ({ functionCall: { name: c.name, args: c.args } }));
      const candidate = (content: Array<Record<string, unknown>>, last: boolean) => ({
        content: { role: 'model', parts: content },
        ...(last ? { finishReason: 'STOP' } : {}),
        index: 0,
      });
      if (call[2] === 'generateContent') {
        const whole = answer.chunks.join('');
        json(200, {
          candidates: [candidate([...(whole === '' ? [] : [{ text: whole }]), ...calls], true)],
          usageMetadata,
          modelVersion: call[1],
        });
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const event = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\r\n\r\n`);
      answer.chunks.forEach((chunk, i) => {
        const last = i === answer.chunks.length - 1 && calls.length === 0;
        event({ candidates: [candidate([{ text: chunk }], last)], ...(last ? { usageMetadata } : {}), modelVersion: call[1] });
      });
      if (calls.length > 0 || answer.chunks.length === 0)
        event({ candidates: [candidate(calls, true)], usageMetadata, modelVersion: call[1] });
      res.end();
    });
  });
  // Idle keep-alive connections stay open until the client drops them (see openai-server.ts).
  server.keepAliveTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1beta`;
  return fake;
}
