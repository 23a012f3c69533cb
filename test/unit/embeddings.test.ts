import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { EMBEDDING_DIMENSIONS, HashingEmbedder, HttpEmbedder } from '../../src/platform/ai/embeddings';

const cosine = (a: number[], b: number[]) => a.reduce((s, v, i) => s + v * (b[i] as number), 0);

describe('the built-in hashing embedder', () => {
  test('is deterministic, normalized, and closer for texts that share words', async () => {
    const embedder = new HashingEmbedder();
    const [a, again, near, far] = await embedder.embed(['tomatoes and basil', 'tomatoes and basil', 'basil with tomatoes', 'quarterly revenue report']);
    expect(a).toHaveLength(EMBEDDING_DIMENSIONS);
    expect(again).toEqual(a);
    expect(cosine(a!, a!)).toBeCloseTo(1, 6);
    expect(cosine(a!, near!)).toBeGreaterThan(cosine(a!, far!));
  });
});

describe('the OpenAI-compatible embeddings provider', () => {
  test('posts model and inputs, sends the key, and returns the vectors in input order', async () => {
    const seen: Array<{ auth?: string; body: { model: string; input: string[]; dimensions: number } }> = [];
    const server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const body = JSON.parse(raw) as { model: string; input: string[]; dimensions: number };
        seen.push({ auth: req.headers.authorization, body });
        const data = body.input.map((_, index) => ({ object: 'embedding', index, embedding: Array.from({ length: body.dimensions }, (_, d) => (d === index ? 3 : 0)) }));
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ object: 'list', data: data.reverse(), model: body.model }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
      const embedder = new HttpEmbedder({ baseUrl: url, apiKey: 'sk-test', model: 'embed-small' });
      const vectors = await embedder.embed(['first', 'second']);
      expect(seen[0]).toEqual({ auth: 'Bearer sk-test', body: { model: 'embed-small', input: ['first', 'second'], dimensions: EMBEDDING_DIMENSIONS } });
      expect(vectors[0]![0]).toBe(1); // normalized, and in input order despite the reversed answer
      expect(vectors[1]![1]).toBe(1);
      await expect(new HttpEmbedder({ baseUrl: 'http://127.0.0.1:1', apiKey: null, model: 'm', timeoutMs: 500 }).embed(['x'])).rejects.toThrow();
    } finally {
      server.close();
    }
  });
});
