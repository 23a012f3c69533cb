import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { developmentSpeech } from '../../src/platform/ai/development-speech';
import { storeFile } from '../helpers/files';
import { binaryBody, type Harness, type TestUser, useHarnessWith } from '../helpers/harness';
import { type FakeModelServer, startFakeModel } from '../helpers/openai-server';

/**
 * Media through the AI SDK's OpenAI provider against a local server speaking the OpenAI images,
 * transcriptions and speech formats: the deployment's priced models, and a user's own connection.
 */
let fake: FakeModelServer;
beforeAll(async () => {
  fake = await startFakeModel();
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.media.behaviour = { kind: 'ok' };
});

const settings = () => ({
  MODEL_PROVIDER_BASE_URL: fake.baseUrl,
  MODEL_PROVIDER_MODELS: 'test-model',
  MODEL_PROVIDER_IMAGE_MODELS: 'gpt-image-1=4',
  MODEL_PROVIDER_TRANSCRIPTION_MODELS: 'whisper-1=0.01',
  MODEL_PROVIDER_SPEECH_MODELS: 'tts-1=0.0015',
  ENTITLEMENT_MONTHLY_BUDGET_CENTS: '10',
  OUTBOUND_ALLOW_LOOPBACK: 'true',
});
const ctx = useHarnessWith(settings, 'alice', 'bob');

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function content(h: Harness, user: TestUser, outputId: string): Promise<Buffer> {
  const res = await h.http().get(`/api/v1/outputs/${outputId}/content`).set(user.auth).buffer(true).parse(binaryBody);
  expect(res.status).toBe(200);
  return res.body as Buffer;
}

const ledger = (h: Harness, userId: string) =>
  sql<{
    kind: string;
    model: string;
    unit: string;
    units: number;
    input_tokens: number;
    output_tokens: number;
    cost: number;
    connection_id: string | null;
    resource_id: string;
  }>`
    select kind, model, unit, units::int, input_tokens, output_tokens, cost_micro_cents::int as cost, connection_id, resource_id
    from usage_records where user_id = ${userId} order by id`
    .execute(h.runtime.database.db)
    .then((r) => r.rows);

const outputCount = async (h: Harness, user: TestUser) =>
  ((await h.http().get('/api/v1/outputs').query({ limit: 200 }).set(user.auth)).body.outputs as unknown[]).length;

describe('media through an OpenAI-format provider', () => {
  test('the deployment lists its media models with their prices', async () => {
    const models = (await ctx.h.http().get('/api/v1/models').set(ctx.alice.auth)).body.models as Array<Record<string, unknown>>;
    expect(models.map((m) => [m.modelId, m.kinds, m.unitPrice ?? null])).toEqual([
      ['test-model', ['chat'], null],
      ['gpt-image-1', ['image'], { unit: 'image', cents: 4 }],
      ['whisper-1', ['transcription'], { unit: 'second', cents: 0.01 }],
      ['tts-1', ['speech'], { unit: 'character', cents: 0.0015 }],
    ]);
  });

  test('images: the bytes read back are the ones the provider made; usage and cost are recorded as it reported', async () => {
    const user = await ctx.h.newUser('images');
    const before = fake.media.images.length;
    const res = await ctx.h.http().post('/api/v1/media/images').set(user.auth).send({ prompt: 'Two boats', size: '1024x1024', count: 2 });
    expect(res.status).toBe(200);
    const request = fake.media.requests.at(-1)!;
    expect(request).toMatchObject({
      path: '/v1/images/generations',
      fields: { model: 'gpt-image-1', prompt: 'Two boats', n: '2', size: '1024x1024' },
    });
    const made = fake.media.images.slice(before);
    expect(made).toHaveLength(2);
    for (const [i, output] of (res.body.outputs as Array<{ outputId: string; sha256: string; model: string }>).entries()) {
      const bytes = await content(ctx.h, user, output.outputId);
      expect(sha256(bytes)).toBe(sha256(made[i]!));
      expect(output).toMatchObject({ sha256: sha256(made[i]!), model: 'gpt-image-1' });
    }
    // 2 images at 4 cents; the tokens as the provider reported them.
    expect(res.body.usage).toEqual({ unit: 'image', units: 2, inputTokens: 12, outputTokens: 272, costCents: 8 });
    expect(await ledger(ctx.h, user.userId)).toEqual([
      {
        kind: 'media.image',
        model: 'gpt-image-1',
        unit: 'image',
        units: 2,
        input_tokens: 12,
        output_tokens: 272,
        cost: 8_000_000,
        connection_id: null,
        resource_id: res.body.generationId,
      },
    ]);
    const spent = await ctx.h.http().get('/api/v1/subscription').set(user.auth);
    expect(spent.body.subscription.usage.spentCents).toBe(8);
  });

  test('an edit sends the input image to /v1/images/edits', async () => {
    const user = await ctx.h.newUser('edits');
    const made = await ctx.h.http().post('/api/v1/media/images').set(user.auth).send({ prompt: 'Source' });
    const png = await content(ctx.h, user, made.body.outputs[0].outputId);
    const file = await storeFile(ctx.h, user, 'source.png', 'image/png', png);
    const edit = await ctx.h.http().post('/api/v1/media/images').set(user.auth).send({ prompt: 'Add a moon', inputFileId: file.fileId });
    expect(edit.status).toBe(200);
    const request = fake.media.requests.at(-1)!;
    expect(request.path).toBe('/v1/images/edits');
    expect(request.fields).toMatchObject({ model: 'gpt-image-1', prompt: 'Add a moon' });
    expect(request.files.map((f) => sha256(f.bytes))).toEqual([sha256(png)]);
    expect(sha256(await content(ctx.h, user, edit.body.outputs[0].outputId))).toBe(sha256(fake.media.images.at(-1)!));
    expect(edit.body.outputs[0]).toMatchObject({ origin: 'image_edit', sourceFileId: file.fileId });
  });

  test('transcription: verbose JSON with segments, priced by the seconds of audio', async () => {
    const user = await ctx.h.newUser('transcribe');
    const audio = await storeFile(ctx.h, user, 'memo.wav', 'audio/wav', developmentSpeech('anything'));
    const res = await ctx.h.http().post('/api/v1/media/transcriptions').set(user.auth).send({ fileId: audio.fileId, language: 'en' });
    expect(res.status).toBe(200);
    const request = fake.media.requests.at(-1)!;
    expect(request).toMatchObject({
      path: '/v1/audio/transcriptions',
      fields: { model: 'whisper-1', response_format: 'verbose_json', language: 'en' },
    });
    expect(request.files.map((f) => sha256(f.bytes))).toEqual([sha256(developmentSpeech('anything'))]);
    expect(res.body.transcription).toEqual({
      text: 'Hello there. This is a test.',
      language: 'en',
      durationSeconds: 2.5,
      segments: [
        { text: ' Hello there.', startSecond: 0, endSecond: 1.2 },
        { text: ' This is a test.', startSecond: 1.2, endSecond: 2.5 },
      ],
    });
    expect((await content(ctx.h, user, res.body.output.outputId)).toString('utf8')).toBe('Hello there. This is a test.');
    expect(res.body.usage).toEqual({ unit: 'second', units: 3, inputTokens: 0, outputTokens: 0, costCents: 0.03 });
    expect(await ledger(ctx.h, user.userId)).toEqual([
      expect.objectContaining({ kind: 'media.transcription', model: 'whisper-1', unit: 'second', units: 3, cost: 30_000 }),
    ]);
  });

  test('speech: the audio the provider returned, in the format asked for, priced by the character', async () => {
    const user = await ctx.h.newUser('speech');
    const wav = await ctx.h
      .http()
      .post('/api/v1/media/speech')
      .set(user.auth)
      .send({ text: 'Hello', voice: 'nova', format: 'wav', speed: 1.25 });
    expect(wav.status).toBe(200);
    expect(fake.media.requests.at(-1)).toMatchObject({
      path: '/v1/audio/speech',
      fields: { model: 'tts-1', input: 'Hello', voice: 'nova', response_format: 'wav', speed: '1.25' },
    });
    expect(wav.body.output).toMatchObject({ mimeType: 'audio/wav', name: 'speech.wav', prompt: 'Hello' });
    expect((await content(ctx.h, user, wav.body.output.outputId)).equals(fake.media.speech.at(-1)!)).toBe(true);
    const mp3 = await ctx.h.http().post('/api/v1/media/speech').set(user.auth).send({ text: 'Hello again' });
    expect(mp3.body.output).toMatchObject({ mimeType: 'audio/mpeg', name: 'speech.mp3' });
    expect((await content(ctx.h, user, mp3.body.output.outputId)).equals(fake.media.speech.at(-1)!)).toBe(true);
    expect(mp3.body.usage).toEqual({ unit: 'character', units: 11, inputTokens: 0, outputTokens: 0, costCents: 0.0165 });
  });

  test("a provider error is 502 with nothing stored and nothing charged; the key's owner sees no address", async () => {
    const user = await ctx.h.newUser('failing');
    fake.media.behaviour = { kind: 'error', status: 500, message: 'upstream overloaded' };
    for (const [path, body] of [
      ['/api/v1/media/images', { prompt: 'x' }],
      ['/api/v1/media/speech', { text: 'x' }],
    ] as const) {
      const res = await ctx.h.http().post(path).set(user.auth).send(body);
      expect(res.status).toBe(502);
      expect(res.body).toMatchObject({
        code: 'model_provider_error',
        error: 'The model provider answered 500: upstream overloaded',
        generationId: expect.any(String),
      });
      expect(res.body.error).not.toContain('127.0.0.1');
    }
    expect(await outputCount(ctx.h, user)).toBe(0);
    expect(await ledger(ctx.h, user.userId)).toEqual([]);
  });

  test('with nothing left to spend the call is 402 before the model is called', async () => {
    const user = await ctx.h.newUser('spender');
    // 3 images at 4 cents spend the 10-cent allowance.
    expect((await ctx.h.http().post('/api/v1/media/images').set(user.auth).send({ prompt: 'x', count: 3 })).status).toBe(200);
    const requests = fake.media.requests.length;
    const res = await ctx.h.http().post('/api/v1/media/images').set(user.auth).send({ prompt: 'one more' });
    expect(res.status).toBe(402);
    expect(res.body.code).toBe('budget_exhausted');
    expect(fake.media.requests.length).toBe(requests);
    expect(await outputCount(ctx.h, user)).toBe(3);
    expect(await ledger(ctx.h, user.userId)).toHaveLength(1);
  });

  test("a user's own connection: its media models, recorded with the connection at cost 0", async () => {
    const { bob } = ctx;
    const created = await ctx.h
      .http()
      .post('/api/v1/model-providers')
      .set(bob.auth)
      .send({
        kind: 'openai_compatible',
        name: 'Mine',
        baseUrl: fake.baseUrl,
        apiKey: 'sk-bob',
        enabledModels: ['dall-e-3', 'whisper-1', 'tts-1'],
      });
    expect(created.status).toBe(200);
    const connectionId = created.body.connection.connectionId as string;
    const res = await ctx.h
      .http()
      .post('/api/v1/media/images')
      .set(bob.auth)
      .send({ prompt: 'Mine', model: `${connectionId}/dall-e-3` });
    expect(res.status).toBe(200);
    expect(fake.media.requests.at(-1)).toMatchObject({
      fields: { model: 'dall-e-3', response_format: 'b64_json' },
      authorization: 'Bearer sk-bob',
    });
    expect(res.body.outputs[0]).toMatchObject({ model: `${connectionId}/dall-e-3`, connectionId });
    expect(res.body.usage.costCents).toBe(0);
    expect(await ledger(ctx.h, bob.userId)).toEqual([
      expect.objectContaining({ kind: 'media.image', model: `${connectionId}/dall-e-3`, connection_id: connectionId, cost: 0, units: 1 }),
    ]);
    // Another user cannot name it.
    expect(
      (
        await ctx.h
          .http()
          .post('/api/v1/media/images')
          .set(ctx.alice.auth)
          .send({ prompt: 'x', model: `${connectionId}/dall-e-3` })
      ).status,
    ).toBe(400);
    // A provider that refuses the key and echoes it: the answer names neither the key nor the address.
    fake.catalogue.requiredKey = 'sk-other';
    try {
      const refused = await ctx.h
        .http()
        .post('/api/v1/media/speech')
        .set(bob.auth)
        .send({ text: 'x', model: `${connectionId}/tts-1` });
      expect(refused.status).toBe(502);
      expect(refused.body.error).toBe('The model provider answered 401: Incorrect API key provided: [api key]');
      expect(JSON.stringify(refused.body)).not.toMatch(/sk-bob|127\.0\.0\.1/);
    } finally {
      delete fake.catalogue.requiredKey;
    }
    expect(await ledger(ctx.h, bob.userId)).toHaveLength(1);
  });
});

describe('a media call past MEDIA_TIMEOUT_MS', () => {
  const slow = useHarnessWith(() => ({ ...settings(), MEDIA_TIMEOUT_MS: '300' }), 'dan');

  test('is aborted and answered 504, with nothing stored or charged', async () => {
    fake.media.behaviour = { kind: 'hang' };
    const res = await slow.h.http().post('/api/v1/media/speech').set(slow.dan.auth).send({ text: 'Too slow' });
    expect(res.status).toBe(504);
    expect(res.body).toMatchObject({
      code: 'model_provider_timeout',
      error: 'The model provider did not finish within 300 ms.',
      generationId: expect.any(String),
    });
    expect(await outputCount(slow.h, slow.dan)).toBe(0);
    expect(await ledger(slow.h, slow.dan.userId)).toEqual([]);
  });
});
