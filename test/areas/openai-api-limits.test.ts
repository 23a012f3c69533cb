import OpenAI from 'openai';
import { openAiParam } from '../../src/http/error-shape';
import { useHarnessWith } from '../helpers/harness';

// The service's own limits on /v1, answered in OpenAI's shape: the per-user rate limit (429 with
// Retry-After), the body limit (413), a method a path does not have (405).
const ctx = useHarnessWith(() => ({ RATE_LIMIT_PER_MINUTE: '4', BODY_LIMIT: '2kb' }), 'alice', 'bob');

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

  test('fields are named as OpenAI names them', () => {
    expect(openAiParam('/body/messages/0/content/1/image_url/url')).toBe('messages[0].content[1].image_url.url');
    expect(openAiParam('/body/model')).toBe('model');
    expect(openAiParam('/query/limit')).toBe('limit');
    expect(openAiParam('/body')).toBeNull();
    expect(openAiParam('/headers/content-type')).toBeNull();
  });
});
