import { sql } from 'kysely';
import { encodePng } from '../../src/platform/ai/development-files';
import { developmentPicture } from '../../src/platform/ai/development-image';
import { type FakeAnthropicServer, startFakeAnthropic } from '../helpers/anthropic-server';
import { storeFile, createFile } from '../helpers/files';
import { type FakeGoogleServer, startFakeGoogle } from '../helpers/google-server';
import { type TestUser, textBody, useHarnessWith } from '../helpers/harness';
import { type FakeModelServer, parseEvents, scriptAnswers, startFakeModel } from '../helpers/openai-server';

// Attachments on chat messages: images to `vision` models as image parts (each provider kind's
// own wire format, on local servers speaking it), documents as numbered sources the reply cites,
// and the refusals that leave nothing stored. The development model says what it was given.
const ANTHROPIC_KEY = 'sk-ant-api03-ATTACH-SECRET-4c2e8a1f6b3d9075';
const GOOGLE_KEY = 'AIzaSy-ATTACH-SECRET-8d1f3b5a7c9e2046';

let anthropic: FakeAnthropicServer;
let google: FakeGoogleServer;
let openai: FakeModelServer;
beforeAll(async () => {
  [anthropic, google, openai] = await Promise.all([startFakeAnthropic(ANTHROPIC_KEY), startFakeGoogle(GOOGLE_KEY), startFakeModel()]);
  openai.catalogue.models = ['gpt-4o', 'llava-1.6', 'llama3.1:8b'];
});
afterAll(async () => {
  await Promise.all([anthropic?.close(), google?.close(), openai?.close()]);
});

const ctx = useHarnessWith(
  () => ({ OUTBOUND_ALLOW_LOOPBACK: 'true', CHAT_ATTACHMENT_IMAGE_MAX_BYTES: '4kb', CHAT_ATTACHMENT_TEXT_MAX_CHARS: '500' }),
  'alice',
  'bob',
);

const PNG = encodePng(3, 2, developmentPicture('attachment', 3, 2));
const NOTES = '# Launch notes\n\nThe launch moves to Thursday; the venue is the north hall.\n';

async function conversation(user: TestUser, model?: string): Promise<string> {
  const res = await ctx.h
    .http()
    .post('/api/v1/conversations')
    .set(user.auth)
    .send(model ? { model } : {});
  expect(res.status).toBe(200);
  return res.body.conversation.conversationId as string;
}

const send = (user: TestUser, body: Record<string, unknown>) =>
  ctx.h.http().post('/api/v1/conversations/messages').set(user.auth).send(body);

/** The messages stored in a conversation (none after a refused send). */
async function storedMessages(conversationId: string): Promise<number> {
  const rows = await sql<{ n: number }>`select count(*)::int as n from messages where conversation_id = ${conversationId}`.execute(
    ctx.h.runtime.database.db,
  );
  return rows.rows[0]!.n;
}

async function image(user: TestUser, name = 'photo.png') {
  return (await storeFile(ctx.h, user, name, 'image/png', PNG)).fileId;
}

async function document(user: TestUser, name: string, text: string, ingest = true) {
  const file = await storeFile(ctx.h, user, name, 'text/markdown', Buffer.from(text));
  if (ingest) await ctx.h.http().post('/api/v1/files/ingest-document').set(user.auth).send({ fileId: file.fileId }).expect(200);
  return file.fileId;
}

/** A tested (active) connection of the caller's. */
async function connection(user: TestUser, kind: string, baseUrl: string, apiKey: string): Promise<string> {
  const created = await ctx.h
    .http()
    .post('/api/v1/model-providers')
    .set(user.auth)
    .send({ kind, name: `My ${kind}`, baseUrl, apiKey });
  expect(created.status).toBe(200);
  const connectionId = created.body.connection.connectionId as string;
  const tested = await ctx.h.http().post('/api/v1/model-providers/test').set(user.auth).send({ connectionId });
  expect(tested.body.connection).toMatchObject({ status: 'active' });
  return connectionId;
}

describe('attachments with the development model', () => {
  test('an image and a document: stored on the message, described by the model, the document cited', async () => {
    const imageId = await image(ctx.alice);
    const docId = await document(ctx.alice, 'notes.md', NOTES);
    const conversationId = await conversation(ctx.alice);
    const res = await send(ctx.alice, {
      conversationId,
      content: 'What did I attach?',
      knowledge: false,
      attachments: [{ fileId: imageId }, { fileId: docId }],
    });
    expect(res.status).toBe(200);
    const attachments = [
      { fileId: imageId, name: 'photo.png', contentType: 'image/png', sizeBytes: PNG.length, kind: 'image', width: 3, height: 2 },
      {
        fileId: docId,
        name: 'notes.md',
        contentType: 'text/markdown',
        sizeBytes: NOTES.length,
        kind: 'document',
        width: null,
        height: null,
      },
    ];
    expect(res.body.message.attachments).toEqual(attachments);
    expect(res.body.reply.attachments).toEqual([]);
    expect(res.body.reply.content).toContain(`Images: photo.png (image/png, ${PNG.length} bytes, 3 × 2)`);
    expect(res.body.reply.content).toContain(`Sources: [1] notes.md (attached, text/markdown, ${NOTES.length} bytes)`);
    expect(res.body.reply.citations).toEqual([
      expect.objectContaining({ number: 1, sourceType: 'file', sourceId: docId, fileId: docId, title: 'notes.md' }),
    ]);
    expect(res.body.reply.citations[0].snippet).toContain('The launch moves to Thursday');
    const listed = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(ctx.alice.auth);
    expect(listed.body.messages.find((m: { role: string }) => m.role === 'user').attachments).toEqual(attachments);
  });

  test('with a grounded turn, the attached document comes first and knowledge sources are numbered after it', async () => {
    const note = await ctx.h
      .http()
      .post('/api/v1/notes')
      .set(ctx.alice.auth)
      .send({ title: 'Venue', content: 'The zeppelin hangar hosts the launch party.' });
    expect(note.status).toBe(200);
    const docId = await document(ctx.alice, 'plan.md', 'The zeppelin plan: arrive at nine.');
    const conversationId = await conversation(ctx.alice);
    const res = await send(ctx.alice, { conversationId, content: 'zeppelin', knowledge: true, attachments: [{ fileId: docId }] });
    expect(res.status).toBe(200);
    const numbers = (res.body.reply.citations as Array<{ number: number; sourceId: string }>).map((c) => c.number);
    expect(res.body.reply.citations[0]).toMatchObject({ number: 1, sourceId: docId });
    expect(res.body.reply.citations.some((c: { sourceId: string }) => c.sourceId === note.body.note.noteId)).toBe(true);
    expect(numbers).toEqual(numbers.map((_, i) => i + 1));
  });

  test('a streamed turn gives the model the image too', async () => {
    const imageId = await image(ctx.alice, 'stream.png');
    const conversationId = await conversation(ctx.alice);
    const res = await ctx.h
      .http()
      .post('/api/v1/conversations/messages/stream')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Look', attachments: [{ fileId: imageId }] })
      .buffer(true)
      .parse(textBody);
    expect(res.status).toBe(200);
    const events = parseEvents(res.body as string);
    expect(events[0]!.data).toMatchObject({ message: { attachments: [expect.objectContaining({ fileId: imageId, kind: 'image' })] } });
    expect(events.at(-1)).toMatchObject({ event: 'done' });
    expect((events.at(-1)!.data as { message: { content: string } }).message.content).toContain('stream.png (image/png');
  });

  test("another user's file is 404 naming it, and nothing is stored; once shared, it may be attached", async () => {
    const bobsImage = await image(ctx.bob, 'bob.png');
    const conversationId = await conversation(ctx.alice);
    const refused = await send(ctx.alice, { conversationId, content: 'Hi', attachments: [{ fileId: bobsImage }] });
    expect(refused.status).toBe(404);
    expect(refused.body.error).toContain(bobsImage);
    expect(refused.body.details).toEqual([expect.objectContaining({ path: '/body/attachments/0/fileId' })]);
    expect(await storedMessages(conversationId)).toBe(0);
    await ctx.h
      .http()
      .patch('/api/v1/files/share')
      .set(ctx.bob.auth)
      .send({ fileId: bobsImage, add: [ctx.alice.userId] })
      .expect(200);
    const shared = await send(ctx.alice, { conversationId, content: 'Hi', attachments: [{ fileId: bobsImage }] });
    expect(shared.status).toBe(200);
    expect(shared.body.reply.content).toContain('bob.png (image/png');
  });

  test('bad attachments are 4xx naming the file, and store nothing', async () => {
    const conversationId = await conversation(ctx.alice);
    const imageId = await image(ctx.alice);
    const pending = await createFile(ctx.h, ctx.alice, { name: 'later.png', mimeType: 'image/png', sizeBytes: 10 });
    const raw = await document(ctx.alice, 'raw.md', NOTES, false);
    const long = await document(ctx.alice, 'long.md', 'word '.repeat(150));
    const big = (await storeFile(ctx.h, ctx.alice, 'big.png', 'image/png', Buffer.alloc(5000, 7))).fileId;
    const broken = (await storeFile(ctx.h, ctx.alice, 'broken.png', 'image/png', Buffer.from('not an image at all'))).fileId;
    const folder = await createFile(ctx.h, ctx.alice, { name: 'Folder', kind: 'folder' });
    const cases: Array<[unknown, number, string]> = [
      [[{ fileId: imageId }, { fileId: imageId }], 400, imageId],
      [Array.from({ length: 11 }, () => ({ fileId: imageId })), 400, 'attachments'],
      [[], 400, 'attachments'],
      [[{ fileId: imageId, name: 'x' }], 400, 'attachments'],
      [[{ fileId: '' }], 400, 'fileId'],
      [[{ fileId: pending.fileId }], 409, pending.fileId],
      [[{ fileId: raw }], 409, raw],
      [[{ fileId: long }], 413, long],
      [[{ fileId: big }], 413, big],
      [[{ fileId: broken }], 400, broken],
      [[{ fileId: folder.fileId }], 400, folder.fileId],
      [[{ fileId: '01936d2e-7b1a-7c3e-9f00-5a2b9c4d1e60' }], 404, '01936d2e-7b1a-7c3e-9f00-5a2b9c4d1e60'],
    ];
    for (const [attachments, status, named] of cases) {
      const res = await send(ctx.alice, { conversationId, content: 'Hi', attachments });
      expect({ attachments, status: res.status }).toEqual({ attachments, status });
      expect(JSON.stringify(res.body)).toContain(named);
    }
    const six = await Promise.all(Array.from({ length: 6 }, (_, i) => document(ctx.alice, `d${i}.md`, `Doc ${i}.`)));
    const tooMany = await send(ctx.alice, { conversationId, content: 'Hi', attachments: six.map((fileId) => ({ fileId })) });
    expect(tooMany.status).toBe(400);
    expect(await storedMessages(conversationId)).toBe(0);
  });
});

describe('attachments through each provider kind', () => {
  /** Sends `content` with an image on `model` and returns the reply. */
  async function withImage(user: TestUser, model: string) {
    const imageId = await image(user, 'chart.png');
    const conversationId = await conversation(user, model);
    const res = await send(user, { conversationId, content: 'Describe the chart', knowledge: false, attachments: [{ fileId: imageId }] });
    return { res, conversationId };
  }
  const base64 = PNG.toString('base64');

  test('OpenAI-compatible: a vision model gets an image_url data URL; a model without vision is 400 naming it', async () => {
    const connectionId = await connection(ctx.alice, 'openai_compatible', openai.baseUrl, 'sk-compat');
    const first = openai.requests.length;
    const { res } = await withImage(ctx.alice, `${connectionId}/llava-1.6`);
    expect(res.status).toBe(200);
    const user = openai.requests[first]!.body.messages.find((m) => m.role === 'user') as unknown as { content: unknown };
    expect(user.content).toEqual([
      { type: 'text', text: 'Describe the chart' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${base64}` } },
    ]);
    const calls = openai.requests.length;
    const { res: refused, conversationId } = await withImage(ctx.alice, `${connectionId}/llama3.1:8b`);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toContain(`${connectionId}/llama3.1:8b`);
    expect(await storedMessages(conversationId)).toBe(0);
    expect(openai.requests.length).toBe(calls);
  });

  test('OpenAI: gpt-4o gets the image as an image_url data URL', async () => {
    const connectionId = await connection(ctx.alice, 'openai', openai.baseUrl, 'sk-openai');
    const first = openai.requests.length;
    const { res } = await withImage(ctx.alice, `${connectionId}/gpt-4o`);
    expect(res.status).toBe(200);
    expect(JSON.stringify(openai.requests[first]!.body.messages)).toContain(
      JSON.stringify({ type: 'image_url', image_url: { url: `data:image/png;base64,${base64}` } }),
    );
  });

  test('Anthropic: an image content block with a base64 source', async () => {
    const connectionId = await connection(ctx.alice, 'anthropic', anthropic.baseUrl, ANTHROPIC_KEY);
    const first = anthropic.requests.length;
    const { res } = await withImage(ctx.alice, `${connectionId}/claude-sonnet-4-5`);
    expect(res.status).toBe(200);
    const sent = anthropic.requests.slice(first).find((r) => r.path === '/v1/messages')!;
    expect(sent.body?.messages?.[0]).toMatchObject({
      role: 'user',
      content: [
        { type: 'text', text: 'Describe the chart' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: base64 } },
      ],
    });
  });

  test('Google: an inlineData part', async () => {
    const connectionId = await connection(ctx.alice, 'google', google.baseUrl, GOOGLE_KEY);
    const first = google.requests.length;
    const { res } = await withImage(ctx.alice, `${connectionId}/gemini-2.5-flash`);
    expect(res.status).toBe(200);
    const sent = google.requests.slice(first).find((r) => r.model === 'gemini-2.5-flash')!;
    expect(JSON.stringify(sent.body)).toContain(JSON.stringify({ inlineData: { mimeType: 'image/png', data: base64 } }));
  });

  test('a turn continued after an approval sends the stored message its images again (a deleted one is left out)', async () => {
    const connectionId = await connection(ctx.alice, 'openai', openai.baseUrl, 'sk-openai');
    const model = `${connectionId}/gpt-4o`;
    const imageUrl = JSON.stringify({ type: 'image_url', image_url: { url: `data:image/png;base64,${base64}` } });
    /** A turn paused on notes_create (approval required by default), then approved: the request that continues it. */
    async function continued(remove: boolean) {
      const imageId = await image(ctx.alice, 'kept.png');
      const conversationId = await conversation(ctx.alice, model);
      scriptAnswers(openai, {
        kind: 'tool-calls',
        calls: [{ id: 'call_a', name: 'notes_create', arguments: '{"title":"Chart","content":"Seen."}' }],
      });
      const paused = await send(ctx.alice, {
        conversationId,
        content: 'Note the chart',
        knowledge: false,
        attachments: [{ fileId: imageId }],
      });
      expect(paused.body.reply).toMatchObject({ status: 'awaiting_approval' });
      const approvalId = paused.body.reply.parts.find((p: { type: string }) => p.type === 'tool-call').approvalId as string;
      if (remove) await ctx.h.http().delete('/api/v1/files').query({ fileId: imageId }).set(ctx.alice.auth).expect(200);
      const first = openai.requests.length;
      const decided = await ctx.h.http().post('/api/v1/approvals/decide').set(ctx.alice.auth).send({ approvalId, decision: 'approve' });
      expect(decided.status).toBe(200);
      expect(decided.body.reply).toMatchObject({ status: 'complete' });
      return JSON.stringify(openai.requests[first]!.body.messages);
    }
    const kept = await continued(false);
    expect(kept).toContain(imageUrl);
    expect(kept).toContain('Note the chart');
    const without = await continued(true);
    expect(without).not.toContain('image_url');
    expect(without).toContain('Note the chart');
  });
});
