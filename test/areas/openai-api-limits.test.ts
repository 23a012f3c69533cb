import OpenAI from 'openai';
import { openAiParam } from '../../src/http/error-shape';
import { useHarnessWith } from '../helpers/harness';
import { type FakeModelServer, startFakeModel } from '../helpers/openai-server';

// The service's own limits on /v1, answered in OpenAI's shape: the per-user rate limit (429 with
// Retry-After), the body limit (413), a method a path does not have (405); and the deployment's
// `http` embedder (EMBEDDINGS_PROVIDER=http), whose size cannot be changed per call.
let embeddings: FakeModelServer;
beforeAll(async () => {
  embeddings = await startFakeModel();
  embeddings.catalogue.embeddingDimensions = 12;
});
afterAll(() => embeddings?.close());

const ctx = useHarnessWith(
  () => ({
    RATE_LIMIT_PER_MINUTE: '5',
    BODY_LIMIT: '2kb',
    EMBEDDINGS_PROVIDER: 'http',
    EMBEDDINGS_BASE_URL: embeddings.baseUrl,
    EMBEDDINGS_MODEL: 'text-embedding-3-small',
    KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
  }),
  'alice',
  'bob',
  'carol',
);

describe('the service’s limits on /v1', () => {
  test('a body over the limit is 413, a method the path lacks is 405 with Allow', async () => {
    const big = await ctx.h
      .http()
      .post('/v1/chat/completions')
      .set(ctx.bob.auth)
      .send({ model: 'development', messages: [{ role: 'user', content: 'x'.repeat(4096) }] });
    expect(big.status).toBe(413);
    expect(big.body).toEqual({
      error: {
        message: 'The request body is larger than 2048 bytes.',
        type: 'invalid_request_error',
        param: null,
        code: 'payload_too_large',
      },
    });
    const method = await ctx.h.http().delete('/v1/models').set(ctx.bob.auth);
    expect(method.status).toBe(405);
    expect(method.headers.allow).toBe('GET');
    expect(method.body.error).toMatchObject({ type: 'invalid_request_error', code: 'method_not_allowed' });
  });

  test('over the per-user limit: 429 rate_limit_error with Retry-After, which the client reads as RateLimitError', async () => {
    const client = new OpenAI({ baseURL: `${ctx.h.baseUrl}/v1`, apiKey: ctx.alice.token, maxRetries: 0 });
    let limited: unknown;
    for (let i = 0; i < 6 && limited === undefined; i += 1) {
      try {
        await client.models.list();
      } catch (error) {
        limited = error;
      }
    }
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    const error = limited as InstanceType<typeof OpenAI.RateLimitError>;
    expect(Number(error.headers?.get('retry-after'))).toBeGreaterThan(0);
    expect(error.error).toMatchObject({ type: 'rate_limit_error', param: null, code: 'rate_limited' });
  });

  test('the deployment’s http embedder: its model id, the provider’s token count; another size is 400', async () => {
    const client = new OpenAI({ baseURL: `${ctx.h.baseUrl}/v1`, apiKey: ctx.carol.token, maxRetries: 0 });
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['development', 'text-embedding-3-small']);
    const result = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['one two three'] });
    expect(result.data[0]!.embedding).toHaveLength(12);
    expect(result.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
    expect(embeddings.embeddings.at(-1)).toMatchObject({ model: 'text-embedding-3-small', input: ['one two three'] });
    try {
      await client.embeddings.create({ model: 'text-embedding-3-small', input: 'x', dimensions: 64 });
      throw new Error('the call succeeded');
    } catch (error) {
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ param: 'dimensions', code: 'invalid_request' });
    }
  });

  test('fields are named as OpenAI names them', () => {
    expect(openAiParam('/body/messages/0/content/1/image_url/url')).toBe('messages[0].content[1].image_url.url');
    expect(openAiParam('/body/model')).toBe('model');
    expect(openAiParam('/query/limit')).toBe('limit');
    expect(openAiParam('/body')).toBeNull();
    expect(openAiParam('/headers/content-type')).toBeNull();
  });
});
