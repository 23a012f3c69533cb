import { createHash } from 'node:crypto';

/** Every embedding the service stores has this many dimensions (the column is vector(256)). */
export const EMBEDDING_DIMENSIONS = 256;

export interface Embedder {
  readonly name: string;
  embed(texts: string[]): Promise<number[][]>;
}

function normalize(vector: number[]): number[] {
  const norm = Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
  return norm === 0 ? vector : vector.map((v) => v / norm);
}

/**
 * The built-in hashing embedder, for development and tests: each word (and each pair of adjacent
 * words) adds ±1 to a dimension chosen by its hash. Deterministic and dependency-free; it captures
 * word overlap, not meaning.
 */
export class HashingEmbedder implements Embedder {
  readonly name = 'builtin-hashing';

  async embed(texts: string[]): Promise<number[][]> {
    return texts.map((text) => {
      const vector = new Array<number>(EMBEDDING_DIMENSIONS).fill(0);
      const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
      const features = [...words, ...words.slice(1).map((w, i) => `${words[i]} ${w}`)];
      for (const feature of features) {
        const digest = createHash('sha1').update(feature).digest();
        const index = digest.readUInt16BE(0) % EMBEDDING_DIMENSIONS;
        vector[index] = (vector[index] ?? 0) + ((digest[2] ?? 0) & 1 ? 1 : -1);
      }
      return normalize(vector);
    });
  }
}

/** An OpenAI-compatible `/embeddings` endpoint (base URL, key, model), asked for 256 dimensions. */
export class HttpEmbedder implements Embedder {
  readonly name: string;

  constructor(private readonly settings: { baseUrl: string; apiKey: string | null; model: string; timeoutMs?: number }) {
    this.name = `http:${settings.model}`;
  }

  async embed(texts: string[]): Promise<number[][]> {
    const response = await fetch(`${this.settings.baseUrl.replace(/\/$/, '')}/embeddings`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(this.settings.apiKey ? { authorization: `Bearer ${this.settings.apiKey}` } : {}),
      },
      body: JSON.stringify({ model: this.settings.model, input: texts, dimensions: EMBEDDING_DIMENSIONS }),
      signal: AbortSignal.timeout(this.settings.timeoutMs ?? 30_000),
    });
    if (!response.ok) throw new Error(`embeddings endpoint answered ${response.status}`);
    const body = (await response.json()) as { data?: Array<{ index: number; embedding: number[] }> };
    const data = [...(body.data ?? [])].sort((a, b) => a.index - b.index);
    if (data.length !== texts.length || data.some((d) => d.embedding.length !== EMBEDDING_DIMENSIONS)) {
      throw new Error(`embeddings endpoint returned ${data.length} vectors, expected ${texts.length} of ${EMBEDDING_DIMENSIONS} dimensions`);
    }
    return data.map((d) => normalize(d.embedding));
  }
}

export const toVectorLiteral = (vector: number[]) => `[${vector.map((v) => (Number.isFinite(v) ? v.toFixed(6) : '0')).join(',')}]`;
