import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One answer of the Messages API: text, or text then `tool_use` blocks (stop reason `tool_use`). */
export interface AnthropicAnswer {
  chunks: string[];
  toolUses?: Array<{ id: string; name: string; input: Record<string, unknown> }>;
  usage?: { input: number; output: number };
}

/** A Messages API request as the fake received it (the fields the tests read). */
export interface AnthropicRequestBody {
  model?: string;
  stream?: boolean;
  system?: unknown;
  messages?: Array<{ role: string; content: string | Array<Record<string, unknown>> }>;
  tools?: Array<{ name: string; description?: string; input_schema: Record<string, unknown> }>;
}

export interface FakeAnthropicServer {
  /** The base URL of its Messages API (`…/v1`). */
  baseUrl: string;
  /** The key it accepts in `x-api-key`; any other is answered 401, the presented key echoed back. */
  apiKey: string;
  /** The ids `GET /v1/models` lists. */
  models: string[];
  /** What the next replies say, in pieces (streamed as one delta each). */
  chunks: string[];
  usage: { input: number; output: number };
  /** The answers of the next `POST /v1/messages`, taken in order; when none is left, `chunks` and `usage`. */
  script: AnthropicAnswer[];
  requests: { path: string; body: AnthropicRequestBody | null; apiKey?: string; version?: string }[];
  close(): Promise<void>;
}

/**
 * A local server speaking Anthropic's Messages API: `GET /v1/models`, and `POST /v1/messages` as
 * one JSON message or as server-sent events (message_start, content_block_start, one
 * content_block_delta per chunk, content_block_stop, message_delta with the usage, message_stop).
 * Tool calls are `tool_use` content blocks, streamed as the API streams them: a block start with
 * the id, the name and an empty input, the input's JSON in `input_json_delta` pieces, a block stop,
 * and the stop reason `tool_use`.
 */
export async function startFakeAnthropic(apiKey: string): Promise<FakeAnthropicServer> {
  const fake: FakeAnthropicServer = {
    baseUrl: '',
    apiKey,
    models: ['claude-sonnet-4-5', 'claude-haiku-4-5'],
    chunks: ['Hello', ' from', ' Claude.'],
    usage: { input: 12, output: 7 },
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
      const presented = req.headers['x-api-key'] as string | undefined;
      const path = (req.url ?? '').split('?')[0] as string;
      fake.requests.push({
        path,
        body: text ? JSON.parse(text) : null,
        apiKey: presented,
        version: req.headers['anthropic-version'] as string | undefined,
      });
      const json = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (presented !== fake.apiKey) {
        // Echoes the key it was given, as some providers do: the service must never pass it on.
        json(401, { type: 'error', error: { type: 'authentication_error', message: `invalid x-api-key: ${presented ?? ''}` } });
        return;
      }
      if (path === '/v1/models' && req.method === 'GET') {
        const data = fake.models.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-09-29T00:00:00Z' }));
        json(200, { data, has_more: false, first_id: fake.models[0] ?? null, last_id: fake.models.at(-1) ?? null });
        return;
      }
      if (path !== '/v1/messages' || req.method !== 'POST') {
        json(404, { type: 'error', error: { type: 'not_found_error', message: 'Not found' } });
        return;
      }
      const body = JSON.parse(text) as { model: string; stream?: boolean };
      const id = `msg_${fake.requests.length}`;
      const answer = fake.script.shift() ?? { chunks: fake.chunks, usage: fake.usage };
      const usage = answer.usage ?? fake.usage;
      const reply = answer.chunks.join('');
      const toolUses = answer.toolUses ?? [];
      const stopReason = toolUses.length > 0 ? 'tool_use' : 'end_turn';
      if (!body.stream) {
        json(200, {
          id,
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [
            ...(reply === '' ? [] : [{ type: 'text', text: reply }]),
            ...toolUses.map((t) => ({ type: 'tool_use', id: t.id, name: t.name, input: t.input })),
          ],
          stop_reason: stopReason,
          stop_sequence: null,
          usage: { input_tokens: usage.input, output_tokens: usage.output },
        });
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const event = (type: string, data: Record<string, unknown>) =>
        res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
      event('message_start', {
        message: {
          id,
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: usage.input, output_tokens: 1 },
        },
      });
      let index = 0;
      if (answer.chunks.length > 0) {
        event('content_block_start', { index, content_block: { type: 'text', text: '' } });
        for (const chunk of answer.chunks) event('content_block_delta', { index, delta: { type: 'text_delta', text: chunk } });
        event('content_block_stop', { index });
        index += 1;
      }
      for (const use of toolUses) {
        const input = JSON.stringify(use.input);
        const half = Math.floor(input.length / 2);
        event('content_block_start', { index, content_block: { type: 'tool_use', id: use.id, name: use.name, input: {} } });
        for (const piece of [input.slice(0, half), input.slice(half)])
          event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
        event('content_block_stop', { index });
        index += 1;
      }
      event('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: usage.output } });
      event('message_stop', {});
      res.end();
    });
  });
  // Idle keep-alive connections stay open until the client drops them: a server-side timeout races
  // the client reusing the connection on a slow machine ("fetch failed: other side closed").
  server.keepAliveTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}
