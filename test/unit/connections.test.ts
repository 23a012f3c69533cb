import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { discoverModels, modelKinds } from '../../src/platform/ai/connections';
import { ModelProviderFailure } from '../../src/platform/ai/models';
import { Outbound } from '../../src/platform/net/outbound';

const KEY = 'AIza-GOOGLE-SECRET-7c1e2b9d';
let server: http.Server;
let base: string;

// A local server answering the model lists of the Gemini API (`models`, `name: models/…`,
// `inputTokenLimit`, key in `x-goog-api-key`) and of an OpenAI-compatible gateway (`context_length`).
beforeAll(async () => {
  server = http.createServer((req, res) => {
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.url?.startsWith('/v1beta/models')) {
      if (req.headers['x-goog-api-key'] !== KEY) {
        json(400, { error: { code: 400, message: `API key not valid: ${String(req.headers['x-goog-api-key'])}`, status: 'INVALID_ARGUMENT' } });
        return;
      }
      json(200, {
        models: [
          { name: 'models/gemini-2.5-flash', inputTokenLimit: 1048576, supportedGenerationMethods: ['generateContent'] },
          { name: 'models/text-embedding-004', inputTokenLimit: 2048, supportedGenerationMethods: ['embedContent'] },
        ],
      });
      return;
    }
    if (req.url === '/gateway/v1/models') {
      json(200, { data: [{ id: 'openrouter/auto', context_length: 200000 }, { id: 'meta-llama/llama-3.1-8b', max_model_len: 131072 }] });
      return;
    }
    json(404, { error: { message: 'no' } });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const limits = { timeoutMs: 5000, maxBytes: 1 << 20 };
const loopback = new Outbound({ allowLoopback: true, allowedPorts: [] });

describe('discoverModels', () => {
  test('reads the Gemini list: ids without `models/`, the context window from inputTokenLimit', async () => {
    const models = await discoverModels({ kind: 'google', baseUrl: `${base}/v1beta`, apiKey: KEY }, loopback.fetcher(limits));
    expect(models).toEqual([
      { id: 'gemini-2.5-flash', contextWindow: 1048576 },
      { id: 'text-embedding-004', contextWindow: 2048 },
    ]);
    expect(models.map((m) => modelKinds('google', m.id))).toEqual([['chat', 'tools', 'vision'], ['embeddings']]);
  });

  test('reads context windows where an OpenAI-compatible list gives them', async () => {
    const models = await discoverModels({ kind: 'openai_compatible', baseUrl: `${base}/gateway/v1`, apiKey: null }, loopback.fetcher(limits));
    expect(models).toEqual([
      { id: 'openrouter/auto', contextWindow: 200000 },
      { id: 'meta-llama/llama-3.1-8b', contextWindow: 131072 },
    ]);
  });

  test('a refused key is a failure whose message holds neither the key nor the address', async () => {
    const failure = await discoverModels({ kind: 'google', baseUrl: `${base}/v1beta`, apiKey: `${KEY}-wrong` }, loopback.fetcher(limits)).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ModelProviderFailure);
    expect((failure as ModelProviderFailure).message).toBe('The model provider answered 400: API key not valid: [api key]');
    expect(`${(failure as ModelProviderFailure).message} ${(failure as ModelProviderFailure).detail}`).not.toContain(KEY);
  });

  test('the outbound guard refuses a loopback address at call time unless it is allowed', async () => {
    const guarded = new Outbound({ allowLoopback: false, allowedPorts: [] });
    const failure = await discoverModels({ kind: 'google', baseUrl: `${base}/v1beta`, apiKey: KEY }, guarded.fetcher(limits)).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ModelProviderFailure);
    expect((failure as ModelProviderFailure).message).toMatch(/^The connection's (URL|address) is not allowed/);
    expect((failure as ModelProviderFailure).message).not.toContain('127.0.0.1');
  });
});

describe('modelKinds', () => {
  test('recognises the families by name', () => {
    expect(modelKinds('openai', 'gpt-4o-mini')).toEqual(['chat', 'tools', 'vision']);
    expect(modelKinds('openai', 'gpt-3.5-turbo')).toEqual(['chat', 'tools']);
    expect(modelKinds('openai', 'text-embedding-3-small')).toEqual(['embeddings']);
    expect(modelKinds('openai', 'whisper-1')).toEqual(['transcription']);
    expect(modelKinds('openai', 'tts-1')).toEqual(['speech']);
    expect(modelKinds('openai', 'gpt-image-1')).toEqual(['image']);
    expect(modelKinds('openai_compatible', 'llama3.1:8b')).toEqual(['chat']);
    expect(modelKinds('openai_compatible', 'nomic-embed-text')).toEqual(['embeddings']);
  });
});
