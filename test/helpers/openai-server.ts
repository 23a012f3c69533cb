import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleMedia, type MediaState, newMediaState } from './media-server';
import { type Receiver, startReceiver } from './receiver';

/** How the fake model answers one chat completion request. */
export type Behaviour =
  | { kind: 'reply'; chunks: string[]; usage?: { prompt: number; completion: number } }
  | { kind: 'error'; status: number; message: string }
  /** Never answers. */
  | { kind: 'hang' }
  /** Answers as `then` once `until` settles. */
  | { kind: 'hold'; until: Promise<unknown>; then: Behaviour }
  /** Streams these chunks, then never finishes. */
  | { kind: 'stall'; chunks: string[] }
  /** Streams `chunks`, waits for `until` to settle, then streams `rest` and finishes (a reply spanning an event). */
  | { kind: 'pause'; chunks: string[]; until: Promise<unknown>; rest: string[]; usage?: { prompt: number; completion: number } }
  /**
   * Calls tools (OpenAI format: `tool_calls`, finish reason `tool_calls`), after the text in
   * `chunks` if any; `arguments` is the JSON text as the model writes it (streamed in two pieces).
   */
  | {
      kind: 'tool-calls';
      calls: Array<{ id: string; name: string; arguments: string }>;
      chunks?: string[];
      usage?: { prompt: number; completion: number };
    };

/** A chat completions request as the fake received it. */
export interface FakeRequestBody {
  model: string;
  stream?: boolean;
  messages: Array<{
    role: string;
    content: string | null;
    tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
    tool_call_id?: string;
  }>;
  tools?: Array<{ type: 'function'; function: { name: string; description?: string; parameters: Record<string, unknown> } }>;
}

/** How the fake answers `GET /v1/models` and `POST /v1/embeddings`. */
export interface FakeCatalogue {
  /** The ids `GET /v1/models` lists; null: it answers 404. */
  models: string[] | null;
  /**
   * The size of the vectors `POST /v1/embeddings` returns (whatever size was asked); null: the
   * connection is dropped (a server that is down); `hang`: it never answers.
   */
  embeddingDimensions: number | null | 'hang';
  /**
   * The key every request must carry (`Authorization: Bearer <key>`); another is answered 401 with
   * the presented key echoed in the message, as some providers do. Unset: any request passes.
   */
  requiredKey?: string;
}

export interface FakeModelServer {
  /** The base URL of its OpenAI-compatible API (`…/v1`). */
  baseUrl: string;
  catalogue: FakeCatalogue;
  /** How many `POST /v1/embeddings` requests arrived. */
  embeddingRequests: number;
  /** The `POST /v1/embeddings` requests that arrived, with the key they carried. */
  embeddings: { model: string; input: string[]; authorization?: string }[];
  requests: { body: FakeRequestBody; authorization?: string }[];
  /** Requests whose client went away before the answer ended. */
  abandoned: () => number;
  behaviour: (n: number) => Behaviour;
  /** Its OpenAI media APIs (images, transcriptions, speech): how they answer and what they received. */
  media: MediaState;
  close(): Promise<void>;
}

/**
 * A local server speaking the OpenAI chat completions protocol (plain JSON and streamed
 * server-sent events, with usage), answering as `behaviour` says.
 */
export async function startFakeModel(
  behaviour: FakeModelServer['behaviour'] = () => ({ kind: 'reply', chunks: ['Hello', ' there.'] }),
): Promise<FakeModelServer> {
  let abandoned = 0;
  const fake: FakeModelServer = {
    baseUrl: '',
    catalogue: { models: ['test-model'], embeddingDimensions: 256 },
    embeddingRequests: 0,
    embeddings: [],
    requests: [],
    abandoned: () => abandoned,
    behaviour,
    media: newMediaState(),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const { requiredKey } = fake.catalogue;
      if (requiredKey !== undefined && req.headers.authorization !== `Bearer ${requiredKey}`) {
        const presented = (req.headers.authorization ?? '').replace(/^Bearer /, '');
        res
          .writeHead(401, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: `Incorrect API key provided: ${presented}`, type: 'invalid_request_error' } }));
        return;
      }
      if (req.url === '/v1/models' && req.method === 'GET') {
        const { models } = fake.catalogue;
        if (models === null) res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"no model list here"}}');
        else
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ object: 'list', data: models.map((id) => ({ id, object: 'model', owned_by: 'local' })) }));
        return;
      }
      if (req.url === '/v1/embeddings' && req.method === 'POST') {
        fake.embeddingRequests += 1;
        const { embeddingDimensions: size } = fake.catalogue;
        const request = JSON.parse(Buffer.concat(parts).toString('utf8') || '{}') as { model: string; input: string[] | string };
        const texts = Array.isArray(request.input) ? request.input : [request.input];
        fake.embeddings.push({ model: request.model, input: texts, authorization: req.headers.authorization });
        if (size === 'hang') return;
        if (size === null) {
          req.socket.destroy();
          return;
        }
        // A deterministic vector per text: its characters' codes spread over the dimensions.
        const embed = (text: string) =>
          Array.from(
            { length: size },
            (_, d) => [...text].reduce((sum, c, i) => sum + (((c.charCodeAt(0) * (i + 1) + d) % 7) - 3), 0) + 0.5,
          );
        // Usage as OpenAI reports it: one token per word here.
        const tokens = texts.reduce((sum, text) => sum + (text.match(/\S+/g)?.length ?? 0), 0);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            object: 'list',
            model: request.model,
            data: texts.map((text, index) => ({ object: 'embedding', index, embedding: embed(text) })),
            usage: { prompt_tokens: tokens, total_tokens: tokens },
          }),
        );
        return;
      }
      if (handleMedia(fake.media, req, Buffer.concat(parts), res)) return;
      if (req.url !== '/v1/chat/completions' || req.method !== 'POST') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(parts).toString('utf8'));
      const n = fake.requests.length;
      fake.requests.push({ body, authorization: req.headers.authorization });
      res.on('close', () => {
        if (!res.writableFinished) abandoned += 1;
      });
      const respond = (answer: Behaviour): void => {
        if (answer.kind === 'hang' || res.destroyed) return;
        if (answer.kind === 'hold') {
          const { until, then } = answer;
          void until.then(() => respond(then));
          return;
        }
        if (answer.kind === 'error') {
          res.writeHead(answer.status, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: answer.message, type: 'server_error' } }));
          return;
        }
        const base = { id: `chatcmpl-${n}`, created: 1763784000, model: body.model };
        if (answer.kind === 'tool-calls') {
          const usage = answer.usage ?? { prompt: 10, completion: 5 };
          const text = (answer.chunks ?? []).join('');
          const usageJson = {
            prompt_tokens: usage.prompt,
            completion_tokens: usage.completion,
            total_tokens: usage.prompt + usage.completion,
          };
          if (!body.stream) {
            res.writeHead(200, { 'content-type': 'application/json' });
            const toolCalls = answer.calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
            res.end(
              JSON.stringify({
                ...base,
                object: 'chat.completion',
                choices: [
                  {
                    index: 0,
                    message: { role: 'assistant', content: text === '' ? null : text, tool_calls: toolCalls },
                    finish_reason: 'tool_calls',
                  },
                ],
                usage: usageJson,
              }),
            );
            return;
          }
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
          const event = (data: unknown) =>
            res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', ...(data as object) })}\n\n`);
          (answer.chunks ?? []).forEach((content, i) =>
            event({ choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content } : { content }, finish_reason: null }] }),
          );
          answer.calls.forEach((c, index) => {
            const half = Math.floor(c.arguments.length / 2);
            event({
              choices: [
                {
                  index: 0,
                  delta: {
                    tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments.slice(0, half) } }],
                  },
                  finish_reason: null,
                },
              ],
            });
            event({
              choices: [
                { index: 0, delta: { tool_calls: [{ index, function: { arguments: c.arguments.slice(half) } }] }, finish_reason: null },
              ],
            });
          });
          event({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] });
          event({ choices: [], usage: usageJson });
          res.end('data: [DONE]\n\n');
          return;
        }
        if (!body.stream && answer.kind === 'pause') {
          const { until, chunks, rest, usage } = answer;
          void until.then(() => respond({ kind: 'reply', chunks: [...chunks, ...rest], usage }));
          return;
        }
        if (!body.stream) {
          const usage = answer.kind === 'reply' ? (answer.usage ?? { prompt: 10, completion: 5 }) : { prompt: 0, completion: 0 };
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              ...base,
              object: 'chat.completion',
              choices: [{ index: 0, message: { role: 'assistant', content: answer.chunks.join('') }, finish_reason: 'stop' }],
              usage: { prompt_tokens: usage.prompt, completion_tokens: usage.completion, total_tokens: usage.prompt + usage.completion },
            }),
          );
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        const event = (data: unknown) =>
          res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', ...(data as object) })}\n\n`);
        answer.chunks.forEach((content, i) =>
          event({ choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content } : { content }, finish_reason: null }] }),
        );
        if (answer.kind === 'stall') return;
        const finish = (usage: { prompt: number; completion: number }) => {
          event({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
          event({
            choices: [],
            usage: { prompt_tokens: usage.prompt, completion_tokens: usage.completion, total_tokens: usage.prompt + usage.completion },
          });
          res.end('data: [DONE]\n\n');
        };
        if (answer.kind === 'pause') {
          const { until, rest, usage } = answer;
          void until.then(() => {
            if (res.destroyed) return;
            for (const content of rest) event({ choices: [{ index: 0, delta: { content }, finish_reason: null }] });
            finish(usage ?? { prompt: 10, completion: 5 });
          });
          return;
        }
        finish(answer.usage ?? { prompt: 10, completion: 5 });
      };
      respond(fake.behaviour(n));
    });
  });
  // Idle keep-alive connections stay open until the client drops them: a server-side timeout races
  // the client reusing the connection on a slow machine ("fetch failed: other side closed").
  server.keepAliveTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}

/** Parses a server-sent event stream into its events. */
/** Sets the fake model's next answers, in order from its next request on; then plain replies (`Done.`). */
export function scriptAnswers(model: FakeModelServer, ...answers: Behaviour[]): void {
  const first = model.requests.length;
  model.behaviour = (n) => answers[n - first] ?? { kind: 'reply', chunks: ['Done', '.'] };
}

export function parseEvents(text: string): { event: string; data: Record<string, unknown> }[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      const event = lines.find((l) => l.startsWith('event: '))?.slice(7) ?? 'message';
      const data = lines
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      return { event, data: JSON.parse(data) as Record<string, unknown> };
    });
}

/**
 * A fake model server and a webhook receiver for the test file, started before its harness
 * (declare this first) and closed after it.
 */
export function useFakeModelAndReceiver(): { readonly model: FakeModelServer; readonly receiver: Receiver } {
  let model: FakeModelServer | undefined;
  let receiver: Receiver | undefined;
  beforeAll(async () => {
    model = await startFakeModel();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await model?.close();
    await receiver?.close();
  });
  return {
    get model() {
      return model as FakeModelServer;
    },
    get receiver() {
      return receiver as Receiver;
    },
  };
}
