import http from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { openAiParam } from '../../src/http/error-shape';
import { useHarnessWith } from '../helpers/harness';
import { type FakeModelServer, startFakeModel } from '../helpers/openai-server';

// The service's own limits on /v1, answered in OpenAI's shape: the per-user rate limit (429 with
// Retry-After), the body limit (413), a method a path does not have (405); and the deployment's
// `http` embedder (EMBEDDINGS_PROVIDER=http), whose size cannot be changed per call.
let embeddings: FakeModelServer;
/** A 1 × 1 PNG. */
const PIXEL = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=', 'base64');
/** Serves the PNG at /pixel.png, a page at /page.html, 404 elsewhere. */
const images = http.createServer((req, res) => {
  if (req.url === '/pixel.png') res.writeHead(200, { 'content-type': 'image/png' }).end(PIXEL);
  else if (req.url === '/page.html') res.writeHead(200, { 'content-type': 'text/html' }).end('<p>not an image</p>');
  else res.writeHead(404).end();
});
let imagesUrl = '';
beforeAll(async () => {
  embeddings = await startFakeModel();
  embeddings.catalogue.embeddingDimensions = 12;
  await new Promise<void>((resolve) => images.listen(0, '127.0.0.1', () => resolve()));
  imagesUrl = `http://127.0.0.1:${(images.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await embeddings?.close();
  await new Promise((resolve) => images.close(resolve));
});

const ctx = useHarnessWith(
  () => ({
    RATE_LIMIT_PER_MINUTE: '5',
    BODY_LIMIT: '2kb',
    EMBEDDINGS_PROVIDER: 'http',
    EMBEDDINGS_BASE_URL: embeddings.baseUrl,
    EMBEDDINGS_MODEL: 'text-embedding-3-small',
    KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
    OUTBOUND_ALLOW_LOOPBACK: 'true',
  }),
  'alice',
  'bob',
  'carol',
  'dave',
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

  test('an image by URL is read through the outbound guard; one that is not an image, or not there, is 400', async () => {
    const ask = (url: string) =>
      ctx.h
        .http()
        .post('/v1/chat/completions')
        .set(ctx.dave.auth)
        .send({
          model: 'development',
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'What is it?' },
                { type: 'image_url', image_url: { url } },
              ],
            },
          ],
        });
    const read = await ask(`${imagesUrl}/pixel.png`);
    expect(read.status).toBe(200);
    expect(read.body.choices[0].message.content).toMatch(/Images: image\.png \(image\/png, 68 bytes, 1 × 1\)/);
    const page = await ask(`${imagesUrl}/page.html`);
    expect(page.status).toBe(400);
    expect(page.body.error).toMatchObject({ param: 'messages[0].content[1].image_url.url', code: 'invalid_request' });
    expect(page.body.error.message).toMatch(/must be a PNG, JPEG, GIF or WebP image/);
    const missing = await ask(`${imagesUrl}/gone.png`);
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toMatch(/could not be read: it answered 404/);
  });

  test('fields are named as OpenAI names them', () => {
    expect(openAiParam('/body/messages/0/content/1/image_url/url')).toBe('messages[0].content[1].image_url.url');
    expect(openAiParam('/body/model')).toBe('model');
    expect(openAiParam('/query/limit')).toBe('limit');
    expect(openAiParam('/body')).toBeNull();
    expect(openAiParam('/headers/content-type')).toBeNull();
  });
});
