import http from 'node:http';
import type { AddressInfo } from 'node:net';

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
  requests: { path: string; body: { model?: string; stream?: boolean; system?: unknown; messages?: unknown[] } | null; apiKey?: string; version?: string }[];
  close(): Promise<void>;
}

/**
 * A local server speaking Anthropic's Messages API: `GET /v1/models`, and `POST /v1/messages` as
 * one JSON message or as server-sent events (message_start, content_block_start, one
 * content_block_delta per chunk, content_block_stop, message_delta with the usage, message_stop).
 */
export async function startFakeAnthropic(apiKey: string): Promise<FakeAnthropicServer> {
  const fake: FakeAnthropicServer = {
    baseUrl: '',
    apiKey,
    models: ['claude-sonnet-4-5', 'claude-haiku-4-5'],
    chunks: ['Hello', ' from', ' Claude.'],
    usage: { input: 12, output: 7 },
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
      fake.requests.push({ path, body: text ? JSON.parse(text) : null, apiKey: presented, version: req.headers['anthropic-version'] as string | undefined });
      const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
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
      const reply = fake.chunks.join('');
      if (!body.stream) {
        json(200, {
          id,
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [{ type: 'text', text: reply }],
          stop_reason: 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: fake.usage.input, output_tokens: fake.usage.output },
        });
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const event = (type: string, data: Record<string, unknown>) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
      event('message_start', {
        message: { id, type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: fake.usage.input, output_tokens: 1 } },
      });
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      for (const chunk of fake.chunks) event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: chunk } });
      event('content_block_stop', { index: 0 });
      event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: fake.usage.output } });
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
