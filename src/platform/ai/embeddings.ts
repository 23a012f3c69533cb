import { createHash } from 'node:crypto';
import { describeProviderError, errorDetail, ProviderFailure } from './models';

/** The built-in hashing embedder's size unless EMBEDDINGS_DIMENSIONS says otherwise. */
export const EMBEDDING_DIMENSIONS = 256;

export interface Embedder {
  /**
   * What the vectors were made with (model and, when configured, size): stored beside each
   * vector, so that a change of model re-embeds the records and never compares unlike vectors.
   */
  readonly name: string;
  /** `query`: a search waits for it, so it is given less time than the background indexer's batches. */
  embed(texts: string[], purpose?: 'query' | 'index'): Promise<number[][]>;
}

/** Embeddings failed (see ProviderFailure); the message names both sizes when they differ. */
export class EmbeddingsFailure extends ProviderFailure {
  override name = 'EmbeddingsFailure';

  constructor(
    message: string,
    detail: string = message,
    /** Whether the provider did not answer in time. */
    readonly timedOut = false,
  ) {
    super(message, detail);
  }
}

/** Vectors and the tokens the provider counted for them (0 when it does not say). */
export interface CountedEmbeddings {
  vectors: number[][];
  tokens: number;
}

/**
 * The deployment's embedder as the OpenAI-compatible API calls it: the tokens counted, and
 * another vector size when the embedder can give one.
 */
export interface DeploymentEmbedder extends Embedder {
  /** Whether it can answer vectors of `dimensions`. */
  supportsDimensions(dimensions: number): boolean;
  embedCounted(texts: string[], dimensions?: number): Promise<CountedEmbeddings>;
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
export class HashingEmbedder implements DeploymentEmbedder {
  readonly name: string;

  constructor(private readonly dimensions: number = EMBEDDING_DIMENSIONS) {
    this.name = `builtin-hashing#${dimensions}`;
  }

  /** Any size: it hashes into as many dimensions as asked. */
  supportsDimensions(): boolean {
    return true;
  }

  /** Its vectors (of `dimensions` when given), and a token per word. */
  async embedCounted(texts: string[], dimensions?: number): Promise<CountedEmbeddings> {
    const embedder = dimensions && dimensions !== this.dimensions ? new HashingEmbedder(dimensions) : this;
    const tokens = texts.reduce((sum, text) => sum + (text.match(/\S+/g)?.length ?? 0), 0);
    return { vectors: await embedder.embed(texts), tokens };
  }

  async embed(texts: string[]): Promise<number[][]> {
    return texts.map((text) => {
      const vector = new Array<number>(this.dimensions).fill(0);
      const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
      const features = [...words, ...words.slice(1).map((w, i) => `${words[i]} ${w}`)];
      for (const feature of features) {
        const digest = createHash('sha1').update(feature).digest();
        const index = digest.readUInt16BE(0) % this.dimensions;
        vector[index] = (vector[index] ?? 0) + ((digest[2] ?? 0) & 1 ? 1 : -1);
      }
      return normalize(vector);
    });
  }
}

/**
 * An OpenAI-compatible `/embeddings` endpoint (base URL, key, model). With `dimensions` it asks for
 * that size and checks it; without, the size of its first answer is learned and later answers are
 * checked against it (models such as `nomic-embed-text` have one fixed size and ignore the request).
 */
export class HttpEmbedder implements DeploymentEmbedder {
  readonly name: string;
  private learned: number | null = null;

  constructor(
    private readonly settings: {
      baseUrl: string;
      apiKey: string | null;
      model: string;
      dimensions?: number | null;
      timeoutMs?: number;
      queryTimeoutMs?: number;
    },
  ) {
    this.name = `http:${settings.model}${settings.dimensions ? `#${settings.dimensions}` : ''}`;
  }

  async embed(texts: string[], purpose: 'query' | 'index' = 'index'): Promise<number[][]> {
    return (await this.call(texts, purpose)).vectors;
  }

  /** Only its configured size (EMBEDDINGS_DIMENSIONS), which it asks the provider for. */
  supportsDimensions(dimensions: number): boolean {
    return this.settings.dimensions === dimensions;
  }

  /** Its vectors (given a batch's time), with the tokens the provider counted. */
  embedCounted(texts: string[]): Promise<CountedEmbeddings> {
    return this.call(texts, 'index');
  }

  private async call(texts: string[], purpose: 'query' | 'index'): Promise<CountedEmbeddings> {
    const { baseUrl, apiKey, model, dimensions } = this.settings;
    const timeoutMs = purpose === 'query' ? (this.settings.queryTimeoutMs ?? 5000) : (this.settings.timeoutMs ?? 30_000);
    const signal = AbortSignal.timeout(timeoutMs);
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${baseUrl.replace(/\/$/, '')}/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify({ model, input: texts, ...(dimensions ? { dimensions } : {}) }),
        signal,
      });
      text = await response.text();
    } catch (error) {
      if (signal.aborted)
        throw new EmbeddingsFailure(`The embeddings provider did not answer within ${timeoutMs} ms.`, errorDetail(error), true);
      throw new EmbeddingsFailure('The embeddings provider could not be reached.', errorDetail(error));
    }
    if (!response.ok) {
      throw new EmbeddingsFailure(
        describeProviderError({ statusCode: response.status, responseBody: text }, 'embeddings provider'),
        text.slice(0, 500),
      );
    }
    let body: { data?: Array<{ index: number; embedding: number[] }>; usage?: { prompt_tokens?: unknown } };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      throw new EmbeddingsFailure("The embeddings provider's answer is not JSON.", text.slice(0, 500));
    }
    const data = [...(Array.isArray(body.data) ? body.data : [])].sort((a, b) => a.index - b.index);
    if (data.length !== texts.length || data.some((d) => !Array.isArray(d.embedding))) {
      throw new EmbeddingsFailure(`The embeddings provider returned ${data.length} vectors for ${texts.length} texts.`);
    }
    const expected = dimensions ?? this.learned ?? (data[0] as { embedding: number[] }).embedding.length;
    const other = data.find((d) => d.embedding.length !== expected);
    if (other) {
      const setting = dimensions ? 'EMBEDDINGS_DIMENSIONS' : 'the size of its first answer';
      throw new EmbeddingsFailure(
        `The embeddings model "${model}" returned vectors of ${other.embedding.length} dimensions; expected ${expected} (${setting}). ` +
          `Set EMBEDDINGS_DIMENSIONS to the model's size, or choose a model that returns ${expected}.`,
      );
    }
    this.learned ??= expected;
    const tokens = body.usage?.prompt_tokens;
    return {
      vectors: data.map((d) => normalize(d.embedding)),
      tokens: typeof tokens === 'number' && Number.isFinite(tokens) ? Math.max(0, Math.trunc(tokens)) : 0,
    };
  }
}

export const toVectorLiteral = (vector: number[]) => `[${vector.map((v) => (Number.isFinite(v) ? v.toFixed(6) : '0')).join(',')}]`;
