import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConnectionEmbedder, discoverModels, modelKinds } from '../../src/platform/ai/connections';
import { EmbeddingsFailure } from '../../src/platform/ai/embeddings';
import { ModelProviderFailure } from '../../src/platform/ai/models';
import { Outbound } from '../../src/platform/net/outbound';

const KEY = 'AIza-GOOGLE-SECRET-7c1e2b9d';
let server: http.Server;
let base: string;
let embeddingSize = 3;
const embedRequests: Array<{ key: unknown; body: unknown }> = [];

// A local server answering the model lists of the Gemini API (`models`, `name: models/…`,
// `inputTokenLimit`, key in `x-goog-api-key`) and of an OpenAI-compatible gateway (`context_length`).
beforeAll(async () => {
  server = http.createServer((req, res) => {
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const embedding = /^\/v1beta\/models\/text-embedding-004:(batchEmbedContents|embedContent)$/.exec(req.url ?? '');
    if (req.method === 'POST' && embedding) {
      // The Gemini API's embeddings (one text, or a batch): vectors of `embeddingSize` values.
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as { requests?: unknown[] };
        embedRequests.push({ key: req.headers['x-goog-api-key'], body });
        const values = (i: number) => Array.from({ length: embeddingSize }, (_v, d) => i + d + 1);
        if (embedding[1] === 'embedContent') json(200, { embedding: { values: values(0) } });
        else json(200, { embeddings: (body.requests ?? []).map((_, i) => ({ values: values(i) })) });
      });
      return;
    }
    if (req.url?.startsWith('/v1beta/models')) {
      if (req.headers['x-goog-api-key'] !== KEY) {
        json(400, {
          error: { code: 400, message: `API key not valid: ${String(req.headers['x-goog-api-key'])}`, status: 'INVALID_ARGUMENT' },
        });
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
      json(200, {
        data: [
          { id: 'openrouter/auto', context_length: 200000 },
          { id: 'meta-llama/llama-3.1-8b', max_model_len: 131072 },
        ],
      });
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
    const models = await discoverModels(
      { kind: 'openai_compatible', baseUrl: `${base}/gateway/v1`, apiKey: null },
      loopback.fetcher(limits),
    );
    expect(models).toEqual([
      { id: 'openrouter/auto', contextWindow: 200000 },
      { id: 'meta-llama/llama-3.1-8b', contextWindow: 131072 },
    ]);
  });

  test('a refused key is a failure whose message holds neither the key nor the address', async () => {
    const failure = await discoverModels(
      { kind: 'google', baseUrl: `${base}/v1beta`, apiKey: `${KEY}-wrong` },
      loopback.fetcher(limits),
    ).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ModelProviderFailure);
    expect((failure as ModelProviderFailure).message).toBe('The model provider answered 400: API key not valid: [api key]');
    expect(`${(failure as ModelProviderFailure).message} ${(failure as ModelProviderFailure).detail}`).not.toContain(KEY);
  });

  test('the outbound guard refuses a loopback address at call time unless it is allowed', async () => {
    const guarded = new Outbound({ allowLoopback: false, allowedPorts: [] });
    const failure = await discoverModels({ kind: 'google', baseUrl: `${base}/v1beta`, apiKey: KEY }, guarded.fetcher(limits)).catch(
      (error: unknown) => error,
    );
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
    // Open vision models an OpenAI-compatible server may serve read images (no tools are assumed).
    expect(modelKinds('openai_compatible', 'llava:13b')).toEqual(['chat', 'vision']);
    expect(modelKinds('openai_compatible', 'qwen2.5-vl-7b-instruct')).toEqual(['chat', 'vision']);
  });
});

describe('ConnectionEmbedder', () => {
  const embedder = (kind: 'google' | 'anthropic', learned = new Map<string, number>()) =>
    new ConnectionEmbedder({
      target: { kind, baseUrl: `${base}/v1beta`, apiKey: KEY },
      model: 'text-embedding-004',
      modelId: 'conn-1/text-embedding-004',
      guardedFetch: loopback.fetcher(limits),
      timeoutMs: 5000,
      queryTimeoutMs: 5000,
      learned,
    });

  test("embeds through the Gemini API's batch embeddings with the key; normalized vectors; its name names the connection model", async () => {
    const learned = new Map<string, number>();
    const { vectors } = await embedder('google', learned).embedCounted(['one', 'two'], 'index');
    expect(vectors).toHaveLength(2);
    expect(vectors.map((v) => v.length)).toEqual([3, 3]);
    expect(Math.hypot(...(vectors[0] as number[]))).toBeCloseTo(1);
    expect(embedRequests.at(-1)).toMatchObject({
      key: KEY,
      body: { requests: [expect.objectContaining({ model: 'models/text-embedding-004' }), expect.anything()] },
    });
    expect(embedder('google').name).toBe('connection:conn-1/text-embedding-004');
    expect(learned.get('connection:conn-1/text-embedding-004')).toBe(3);

    // Another size later is refused, naming both sizes.
    embeddingSize = 5;
    const failure = await embedder('google', learned)
      .embed(['three'])
      .catch((error: unknown) => error);
    embeddingSize = 3;
    expect(failure).toBeInstanceOf(EmbeddingsFailure);
    expect((failure as Error).message).toBe(
      'The embeddings model "conn-1/text-embedding-004" returned vectors of 5 dimensions; expected 3 (the size of its first answer).',
    );
  });

  test('Anthropic has no embeddings: a failure, no request', async () => {
    const before = embedRequests.length;
    await expect(embedder('anthropic').embed(['x'])).rejects.toThrow("Anthropic's API has no embeddings models.");
    expect(embedRequests.length).toBe(before);
    expect(modelKinds('anthropic', 'voyage-embed-3')).not.toContain('embeddings');
  });
});
