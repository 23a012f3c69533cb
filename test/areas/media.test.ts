import { createHash } from 'node:crypto';
import { inflateSync } from 'node:zlib';
import { sql } from 'kysely';
import { encodeWav } from '../../src/platform/ai/development-files';
import { developmentImageModel } from '../../src/platform/ai/development-image';
import { decodeDevelopmentSpeech, FOREIGN_AUDIO_TRANSCRIPT } from '../../src/platform/ai/development-speech';
import { storeFile } from '../helpers/files';
import { binaryBody, type Harness, type TestUser, useHarness, useHarnessWith } from '../helpers/harness';

/** Media on the built-in development provider: real PNG and WAV files, made offline. */
const ctx = useHarness('alice', 'bob');

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function content(h: Harness, user: TestUser, outputId: string): Promise<{ status: number; bytes: Buffer; type: string }> {
  const res = await h.http().get(`/api/v1/outputs/${outputId}/content`).set(user.auth).buffer(true).parse(binaryBody);
  return { status: res.status, bytes: res.body as Buffer, type: String(res.headers['content-type']) };
}

/** The width, height and pixel rows of an 8-bit RGB PNG, read as any decoder would. */
function readPng(bytes: Buffer): { width: number; height: number; text: string; rows: Buffer } {
  expect(bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe(true);
  let width = 0;
  let height = 0;
  let text = '';
  const idat: Buffer[] = [];
  for (let at = 8; at < bytes.length;) {
    const length = bytes.readUInt32BE(at);
    const type = bytes.toString('latin1', at + 4, at + 8);
    const data = bytes.subarray(at + 8, at + 8 + length);
    if (type === 'IHDR') [width, height] = [data.readUInt32BE(0), data.readUInt32BE(4)];
    if (type === 'tEXt') text += `${data.toString('latin1')}\n`;
    if (type === 'IDAT') idat.push(data);
    at += 12 + length;
  }
  return { width, height, text, rows: inflateSync(Buffer.concat(idat)) };
}

const usageRows = (h: Harness, userId: string) =>
  sql<{ kind: string; model: string; unit: string; units: number; cost: number; connection_id: string | null; resource_id: string }>`
    select kind, model, unit, units::int, cost_micro_cents::int as cost, connection_id, resource_id from usage_records where user_id = ${userId} order by id`
    .execute(h.runtime.database.db)
    .then((r) => r.rows);

describe('media on the development provider', () => {
  test('the models list the development media models, each of its kind, free, and the defaults', async () => {
    const res = await ctx.h.http().get('/api/v1/models').set(ctx.alice.auth);
    const media = (res.body.models as Array<{ modelId: string; kinds: string[]; unitPrice?: unknown; defaultFor: string[] }>).filter(
      (m) => m.modelId !== 'development',
    );
    expect(media).toEqual([
      expect.objectContaining({
        modelId: 'development-image',
        kinds: ['image'],
        unitPrice: { unit: 'image', cents: 0 },
        defaultFor: ['image'],
      }),
      expect.objectContaining({
        modelId: 'development-transcription',
        kinds: ['transcription'],
        unitPrice: { unit: 'second', cents: 0 },
        defaultFor: ['transcription'],
      }),
      expect.objectContaining({
        modelId: 'development-speech',
        kinds: ['speech'],
        unitPrice: { unit: 'character', cents: 0 },
        defaultFor: ['speech'],
      }),
    ]);
  });

  test('images are real PNGs that follow from the prompt, stored as outputs and read back byte for byte', async () => {
    const { alice } = ctx;
    const res = await ctx.h
      .http()
      .post('/api/v1/media/images')
      .set(alice.auth)
      .send({ prompt: 'A lighthouse at dusk', size: '64x32', count: 2 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      model: 'development-image',
      usage: { unit: 'image', units: 2, inputTokens: 0, outputTokens: 0, costCents: 0 },
      warnings: [],
    });
    const outputs = res.body.outputs as Array<Record<string, unknown>>;
    expect(outputs).toHaveLength(2);
    // What the development model makes for this prompt, called directly.
    const expected = await developmentImageModel().doGenerate({
      prompt: 'A lighthouse at dusk',
      n: 2,
      size: '64x32',
      aspectRatio: undefined,
      seed: undefined,
      files: undefined,
      mask: undefined,
      providerOptions: {},
    });
    for (const [i, output] of outputs.entries()) {
      expect(output).toMatchObject({
        type: 'image',
        mimeType: 'image/png',
        origin: 'image_generation',
        generationId: res.body.generationId,
        prompt: 'A lighthouse at dusk',
        model: 'development-image',
        connectionId: null,
        sourceFileId: null,
        automationId: null,
      });
      const read = await content(ctx.h, alice, output.outputId as string);
      expect(read.status).toBe(200);
      expect(read.type).toBe('image/png');
      expect(sha256(read.bytes)).toBe(output.sha256);
      expect(read.bytes.equals(Buffer.from(expected.images[i] as Uint8Array))).toBe(true);
      const png = readPng(read.bytes);
      expect([png.width, png.height]).toEqual([64, 32]);
      expect(png.rows.length).toBe(32 * (64 * 3 + 1));
      expect(png.text).toContain('development provider');
    }
    expect(outputs[0]!.sha256).not.toBe(outputs[1]!.sha256);
    // The same prompt makes the same picture; another prompt another.
    const again = await ctx.h.http().post('/api/v1/media/images').set(alice.auth).send({ prompt: 'A lighthouse at dusk', size: '64x32' });
    const other = await ctx.h.http().post('/api/v1/media/images').set(alice.auth).send({ prompt: 'A lighthouse at dawn', size: '64x32' });
    expect(again.body.outputs[0].sha256).toBe(outputs[0]!.sha256);
    expect(other.body.outputs[0].sha256).not.toBe(outputs[0]!.sha256);
    // An aspect ratio instead of a size; a size the model cannot make is clamped, with a warning.
    const wide = await ctx.h.http().post('/api/v1/media/images').set(alice.auth).send({ prompt: 'Wide', aspectRatio: '16:9' });
    expect(readPng((await content(ctx.h, alice, wide.body.outputs[0].outputId)).bytes)).toMatchObject({ width: 512, height: 288 });
    const huge = await ctx.h.http().post('/api/v1/media/images').set(alice.auth).send({ prompt: 'Huge', size: '2048x12' });
    expect(huge.body.warnings).toEqual([expect.stringContaining('16 to 1024 pixels')]);

    // The outputs routes list them, filtered by origin and call; the ledger has the call.
    const listed = await ctx.h.http().get('/api/v1/outputs').query({ generationId: res.body.generationId }).set(alice.auth);
    expect((listed.body.outputs as Array<{ outputId: string }>).map((o) => o.outputId).sort()).toEqual(
      outputs.map((o) => o.outputId).sort(),
    );
    const byOrigin = await ctx.h.http().get('/api/v1/outputs').query({ origin: 'speech' }).set(alice.auth);
    expect(byOrigin.body.outputs).toEqual([]);
    const usage = (await usageRows(ctx.h, alice.userId)).find((r) => r.resource_id === res.body.generationId);
    expect(usage).toEqual({
      kind: 'media.image',
      model: 'development-image',
      unit: 'image',
      units: 2,
      cost: 0,
      connection_id: null,
      resource_id: res.body.generationId,
    });
  });

  test("an image is edited from one of the caller's own image files; another's file is 404, a file that is not an image 415", async () => {
    const { alice, bob } = ctx;
    const made = await ctx.h.http().post('/api/v1/media/images').set(alice.auth).send({ prompt: 'Source', size: '32x32' });
    const png = (await content(ctx.h, alice, made.body.outputs[0].outputId)).bytes;
    const file = await storeFile(ctx.h, alice, 'source.png', 'image/png', png);
    const edit = await ctx.h
      .http()
      .post('/api/v1/media/images')
      .set(alice.auth)
      .send({ prompt: 'Make it blue', size: '32x32', inputFileId: file.fileId });
    expect(edit.status).toBe(200);
    expect(edit.body.outputs[0]).toMatchObject({ origin: 'image_edit', sourceFileId: file.fileId, prompt: 'Make it blue' });
    // The edit depends on the input image: the same prompt without it makes another picture.
    const plain = await ctx.h.http().post('/api/v1/media/images').set(alice.auth).send({ prompt: 'Make it blue', size: '32x32' });
    expect(plain.body.outputs[0].sha256).not.toBe(edit.body.outputs[0].sha256);

    const notYours = await ctx.h.http().post('/api/v1/media/images').set(bob.auth).send({ prompt: 'Steal', inputFileId: file.fileId });
    expect(notYours.status).toBe(404);
    expect(notYours.body.details).toEqual([{ path: '/body/inputFileId', message: 'names no record of yours' }]);
    const text = await storeFile(ctx.h, alice, 'fake.png', 'image/png', Buffer.from('not an image at all'));
    const notImage = await ctx.h.http().post('/api/v1/media/images').set(alice.auth).send({ prompt: 'Edit', inputFileId: text.fileId });
    expect(notImage.status).toBe(415);
    expect(notImage.body.code).toBe('unsupported_media_type');
  });

  test('speech is a WAV whose tones the development transcription decodes back exactly', async () => {
    const { alice, bob } = ctx;
    const text = 'Your meeting starts in five minutes. Bring the ünïcode notes!';
    const spoken = await ctx.h.http().post('/api/v1/media/speech').set(alice.auth).send({ text, format: 'mp3' });
    expect(spoken.status).toBe(200);
    expect(spoken.body.output).toMatchObject({
      type: 'audio',
      mimeType: 'audio/wav',
      name: 'speech.wav',
      origin: 'speech',
      prompt: text,
      model: 'development-speech',
    });
    expect(spoken.body.warnings).toEqual([expect.stringContaining('WAV only')]);
    expect(spoken.body.usage).toEqual({ unit: 'character', units: [...text].length, inputTokens: 0, outputTokens: 0, costCents: 0 });
    const wav = await content(ctx.h, alice, spoken.body.output.outputId);
    expect(sha256(wav.bytes)).toBe(spoken.body.output.sha256);
    expect(wav.bytes.toString('latin1', 0, 4)).toBe('RIFF');
    expect(decodeDevelopmentSpeech(wav.bytes)?.text).toBe(text);

    const audio = await storeFile(ctx.h, alice, 'meeting.wav', 'audio/wav', wav.bytes);
    const heard = await ctx.h
      .http()
      .post('/api/v1/media/transcriptions')
      .set(alice.auth)
      .send({ fileId: audio.fileId, language: 'en', saveAsNote: true, ingest: true });
    expect(heard.status).toBe(200);
    expect(heard.body.transcription).toMatchObject({
      text,
      language: 'en',
      segments: [
        expect.objectContaining({ text: 'Your meeting starts in five minutes.', startSecond: 0.16 }),
        expect.objectContaining({ text: 'Bring the ünïcode notes!' }),
      ],
    });
    expect(heard.body.transcription.durationSeconds).toBeGreaterThan(1);
    expect(heard.body.output).toMatchObject({
      type: 'text',
      name: 'meeting-transcript.txt',
      origin: 'transcription',
      sourceFileId: audio.fileId,
      model: 'development-transcription',
    });
    expect((await content(ctx.h, alice, heard.body.output.outputId)).bytes.toString('utf8')).toBe(text);
    expect(heard.body.usage).toMatchObject({ unit: 'second', units: Math.ceil(heard.body.transcription.durationSeconds) });
    // Saved as a note, and as an ingested file.
    const note = await ctx.h.http().get('/api/v1/notes').query({ noteId: heard.body.noteId }).set(alice.auth);
    expect(note.body.note).toMatchObject({ title: 'Transcript of meeting.wav', content: text });
    const file = await ctx.h.http().get('/api/v1/files').query({ fileId: heard.body.fileId }).set(alice.auth);
    expect(file.body.file).toMatchObject({
      name: 'meeting-transcript.txt',
      status: 'ready',
      ingestion: { status: 'ready', chunkCount: 1 },
    });
    const found = await ctx.h
      .http()
      .post('/api/v1/files/search-text')
      .set(alice.auth)
      .send({ query: 'meeting', fileId: heard.body.fileId });
    expect(JSON.stringify(found.body)).toContain(heard.body.fileId);

    // Audio the development provider did not make: an honest answer; something that is not audio: 415.
    const tone = await storeFile(
      ctx.h,
      alice,
      'tone.wav',
      'audio/wav',
      encodeWav(Int16Array.from({ length: 4000 }, (_, i) => Math.round(9000 * Math.sin(i / 5)))),
    );
    const foreign = await ctx.h.http().post('/api/v1/media/transcriptions').set(alice.auth).send({ fileId: tone.fileId });
    expect(foreign.body.transcription).toEqual({ text: FOREIGN_AUDIO_TRANSCRIPT, language: null, durationSeconds: null, segments: [] });
    const notAudio = await storeFile(ctx.h, alice, 'notes.wav', 'audio/wav', Buffer.from('these are words, not sound'));
    const refused = await ctx.h.http().post('/api/v1/media/transcriptions').set(alice.auth).send({ fileId: notAudio.fileId });
    expect(refused.status).toBe(415);
    expect(refused.body).toMatchObject({ code: 'unsupported_media_type', error: expect.stringContaining('not audio') });
    // Another user's audio file, and another user's output.
    expect((await ctx.h.http().post('/api/v1/media/transcriptions').set(bob.auth).send({ fileId: audio.fileId })).status).toBe(404);
    expect((await ctx.h.http().get('/api/v1/outputs').query({ outputId: spoken.body.output.outputId }).set(bob.auth)).status).toBe(404);
    expect((await content(ctx.h, bob, spoken.body.output.outputId)).status).toBe(404);
  });

  test('bad input is a 400 that changes nothing; conversations and projects must be the caller’s', async () => {
    const { alice, bob } = ctx;
    const before = await usageRows(ctx.h, bob.userId);
    const bad: Array<[string, Record<string, unknown>]> = [
      ['/api/v1/media/images', { prompt: '' }],
      ['/api/v1/media/images', { prompt: 'x', count: 5 }],
      ['/api/v1/media/images', { prompt: 'x', size: '100' }],
      ['/api/v1/media/images', { prompt: 'x', size: '64x64', aspectRatio: '1:1' }],
      ['/api/v1/media/images', { prompt: 'x', model: 'development' }],
      ['/api/v1/media/images', { prompt: 'x', model: 'no-such-model' }],
      ['/api/v1/media/images', { prompt: 'x', extra: true }],
      ['/api/v1/media/speech', { text: 'x'.repeat(4097) }],
      ['/api/v1/media/speech', { text: 'x', format: 'ogg' }],
      ['/api/v1/media/speech', { text: 'x', model: 'development-image' }],
      ['/api/v1/media/transcriptions', {}],
      ['/api/v1/media/transcriptions', { fileId: 'f', language: 'english' }],
    ];
    for (const [path, body] of bad) {
      const res = await ctx.h.http().post(path).set(bob.auth).send(body);
      expect([path, body, res.status, res.body.code]).toEqual([path, body, 400, 'invalid_request']);
    }
    const conversation = await ctx.h.http().post('/api/v1/conversations').set(alice.auth).send({});
    const project = await ctx.h.http().post('/api/v1/projects').set(alice.auth).send({ name: 'Alice’s' });
    for (const body of [
      { prompt: 'x', conversationId: conversation.body.conversation.conversationId },
      { prompt: 'x', projectId: project.body.project.projectId },
    ]) {
      expect((await ctx.h.http().post('/api/v1/media/images').set(bob.auth).send(body)).status).toBe(404);
    }
    expect(
      (await ctx.h.http().post('/api/v1/media/speech').set(bob.auth).send({ text: 'x', projectId: project.body.project.projectId })).status,
    ).toBe(404);
    expect((await ctx.h.http().post('/api/v1/media/images').set(bob.auth).send({ prompt: 'x', userId: alice.userId })).status).toBe(403);
    expect(await usageRows(ctx.h, bob.userId)).toEqual(before);
    expect((await ctx.h.http().get('/api/v1/outputs').set(bob.auth)).body.outputs).toEqual([]);

    // In the caller's own project and conversation, the outputs say so.
    const mine = await ctx.h
      .http()
      .post('/api/v1/media/speech')
      .set(alice.auth)
      .send({ text: 'Filed', projectId: project.body.project.projectId, conversationId: conversation.body.conversation.conversationId });
    expect(mine.body.output).toMatchObject({
      projectId: project.body.project.projectId,
      conversationId: conversation.body.conversation.conversationId,
    });
    const inProject = await ctx.h.http().get('/api/v1/outputs').query({ projectId: project.body.project.projectId }).set(alice.auth);
    expect(inProject.body.outputs).toEqual([expect.objectContaining({ outputId: mine.body.output.outputId })]);
  });

  test("the deployment's model policy applies: a blocked media model is refused, and is no one's default", async () => {
    const policy = ctx.h.runtime.services.modelPolicy;
    const admin = { userId: 'policy-admin', requestId: null };
    await policy.updatePolicy(admin, { block: ['development-speech'] });
    try {
      const res = await ctx.h.http().post('/api/v1/media/speech').set(ctx.bob.auth).send({ text: 'Blocked', model: 'development-speech' });
      expect(res.status).toBe(400);
      expect(res.body.details).toEqual([{ path: '/body/model', message: "the deployment's model policy blocks this model" }]);
      const byDefault = await ctx.h.http().post('/api/v1/media/speech').set(ctx.bob.auth).send({ text: 'Blocked too' });
      expect(byDefault.status).toBe(400);
      expect(byDefault.body.error).toBe('No speech model is available.');
    } finally {
      await policy.updatePolicy(admin, { block: [] });
    }
    expect((await ctx.h.http().post('/api/v1/media/speech').set(ctx.bob.auth).send({ text: 'Allowed again' })).status).toBe(200);
  });

  test('an Idempotency-Key makes a retried call answer the first result and call the model once', async () => {
    const user = await ctx.h.newUser('media-retry');
    const send = (body: Record<string, unknown>) =>
      ctx.h.http().post('/api/v1/media/speech').set(user.auth).set('Idempotency-Key', 'speak-1').send(body);
    const first = await send({ text: 'Once only' });
    const again = await send({ text: 'Once only' });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.generationId).toBe(first.body.generationId);
    expect(await usageRows(ctx.h, user.userId)).toHaveLength(1);
    expect((await send({ text: 'Something else' })).status).toBe(422);
  });
});

describe('media within the storage entitlement', () => {
  const small = useHarnessWith(() => ({ ENTITLEMENT_STORAGE: '2kb' }), 'carol');

  test('outputs that do not fit are 402 quota_exceeded, with nothing stored or charged', async () => {
    const { carol } = small;
    const res = await small.h.http().post('/api/v1/media/images').set(carol.auth).send({ prompt: 'Too big to keep', size: '256x256' });
    expect(res.status).toBe(402);
    expect(res.body).toMatchObject({ code: 'quota_exceeded', entitlement: 'storageBytes', limit: 2048, used: 0 });
    expect((await small.h.http().get('/api/v1/outputs').set(carol.auth)).body.outputs).toEqual([]);
    expect(await usageRows(small.h, carol.userId)).toEqual([]);
    // A small one fits, and then counts against the storage like a file.
    const fits = await small.h.http().post('/api/v1/media/images').set(carol.auth).send({ prompt: 'Tiny', size: '16x16' });
    expect(fits.status).toBe(200);
    const subscription = await small.h.http().get('/api/v1/subscription').set(carol.auth);
    expect(subscription.body.subscription.usage.storageUsedBytes).toBe(fits.body.outputs[0].sizeBytes);
  });
});
