import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { EMBEDDING_DIMENSIONS, EmbeddingsFailure, HashingEmbedder, HttpEmbedder } from '../../src/platform/ai/embeddings';

const cosine = (a: number[], b: number[]) => a.reduce((s, v, i) => s + v * (b[i] as number), 0);

describe('the built-in hashing embedder', () => {
  test('is deterministic, normalized, and closer for texts that share words', async () => {
    const embedder = new HashingEmbedder();
    const [a, again, near, far] = await embedder.embed([
      'tomatoes and basil',
      'tomatoes and basil',
      'basil with tomatoes',
      'quarterly revenue report',
    ]);
    expect(a).toHaveLength(EMBEDDING_DIMENSIONS);
    expect(again).toEqual(a);
    expect(cosine(a!, a!)).toBeCloseTo(1, 6);
    expect(cosine(a!, near!)).toBeGreaterThan(cosine(a!, far!));
  });
});

describe('the OpenAI-compatible embeddings provider', () => {
  test('posts model and inputs, sends the key, and returns the vectors in input order', async () => {
    const seen: Array<{ auth?: string; body: { model: string; input: string[]; dimensions?: number } }> = [];
    let size: number | null = null; // null: the size asked for
    const server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const body = JSON.parse(raw) as { model: string; input: string[]; dimensions?: number };
        seen.push({ auth: req.headers.authorization, body });
        const data = body.input.map((_, index) => ({
          object: 'embedding',
          index,
          embedding: Array.from({ length: size ?? body.dimensions ?? 256 }, (_, d) => (d === index ? 3 : 0)),
        }));
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ object: 'list', data: data.reverse(), model: body.model }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
      const embedder = new HttpEmbedder({ baseUrl: url, apiKey: 'sk-test', model: 'embed-small', dimensions: EMBEDDING_DIMENSIONS });
      const vectors = await embedder.embed(['first', 'second']);
      expect(seen[0]).toEqual({
        auth: 'Bearer sk-test',
        body: { model: 'embed-small', input: ['first', 'second'], dimensions: EMBEDDING_DIMENSIONS },
      });
      expect(vectors[0]![0]).toBe(1); // normalized, and in input order despite the reversed answer
      expect(vectors[1]![1]).toBe(1);
      await expect(
        new HttpEmbedder({ baseUrl: 'http://127.0.0.1:1', apiKey: null, model: 'm', timeoutMs: 500 }).embed(['x']),
      ).rejects.toThrow(new EmbeddingsFailure('The embeddings provider could not be reached.'));

      // A model with its own fixed size (nomic-embed-text: 768) while 256 is configured: both sizes named.
      size = 768;
      await expect(embedder.embed(['x'])).rejects.toThrow(
        /"embed-small" returned vectors of 768 dimensions; expected 256 \(EMBEDDINGS_DIMENSIONS\)/,
      );
      // No size configured: none is asked for, the first answer's is learned and later ones checked.
      const learning = new HttpEmbedder({ baseUrl: url, apiKey: null, model: 'nomic-embed-text' });
      expect((await learning.embed(['a']))[0]).toHaveLength(768);
      expect(seen.at(-1)!.body).toEqual({ model: 'nomic-embed-text', input: ['a'] });
      size = 1024;
      await expect(learning.embed(['a'])).rejects.toThrow(/1024 dimensions; expected 768 \(the size of its first answer\)/);
    } finally {
      server.close();
    }
  });
});
