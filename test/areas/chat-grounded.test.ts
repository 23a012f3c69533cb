import { Writable } from 'node:stream';
import { sql } from 'kysely';
import winston from 'winston';
import { storeFile } from '../helpers/files';
import { asListed, type Harness, startHarness, textBody, type TestUser, useHarnessWith } from '../helpers/harness';
import { parseEvents, useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually, subscribe, verify } from '../helpers/receiver';

/**
 * Knowledge-grounded chat (`knowledge` on a message, or the `knowledgeInChat` setting): the
 * caller's best knowledge results go into the prompt as numbered sources and come back as the
 * reply's `citations` — stored, streamed, in `chat.completed` — naming only records the caller
 * may read. Through the development model (which lists the sources it was given) and through a
 * local OpenAI-format server (which shows what the prompt carried).
 */

type Citation = {
  number: number;
  sourceType: string;
  sourceId: string;
  title: string;
  snippet: string;
  highlights: Array<{ start: number; end: number }>;
  projectId: string | null;
  fileId: string | null;
  chunkIndex: number | null;
  startOffset: number | null;
  endOffset: number | null;
};
type Message = { messageId: string; role: string; content: string; status: string; citations: Citation[] };

const servers = useFakeModelAndReceiver();
// The background indexer is left idle: the tests run its passes themselves.
const env =
  (extra: Record<string, string> = {}) =>
  () => ({
    KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
    WEBHOOK_ALLOW_LOOPBACK: 'true',
    WEBHOOK_POLL_INTERVAL_MS: '20',
    ...extra,
  });

const post = async (h: Harness, user: TestUser, path: string, body: Record<string, unknown>) => {
  const res = await h.http().post(path).set(user.auth).send(body);
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};
const conversation = async (h: Harness, user: TestUser): Promise<string> =>
  (await post(h, user, '/api/v1/conversations', {})).conversation.conversationId;
const send = (h: Harness, user: TestUser, body: Record<string, unknown>) =>
  h.http().post('/api/v1/conversations/messages').set(user.auth).send(body);
const messages = async (h: Harness, user: TestUser, conversationId: string): Promise<Message[]> => {
  const res = await h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(user.auth);
  expect(res.status).toBe(200);
  return res.body.messages;
};
const metric = async (h: Harness, name: string) => h.runtime.metrics.registry.getSingleMetricAsString(name);

/** Alice's and Bob's knowledge: private records with the same words, and one file Alice shares with Bob. */
async function seed(h: Harness, alice: TestUser, bob: TestUser) {
  const ids: Record<string, string> = {};
  ids.project = (await post(h, alice, '/api/v1/projects', { name: 'Trips', description: 'Travel plans' })).project.projectId;
  ids.garden = (
    await post(h, alice, '/api/v1/notes', { title: 'Garden plan', content: 'Plant tomatoes and basil in the raised bed this spring.' })
  ).note.noteId;
  ids.allergy = (
    await post(h, alice, '/api/v1/memory', { kind: 'fact', content: 'Allergic to peanuts and shellfish.' })
  ).memoryItem.memoryId;
  const travel = await storeFile(
    h,
    alice,
    'travel.md',
    'text/markdown',
    Buffer.from('# Lisbon trip\n\nFlights booked for October. Hotel near the Alfama district, close to the river.'),
  );
  ids.travel = travel.fileId;
  const recipes = await storeFile(
    h,
    alice,
    'recipes.md',
    'text/markdown',
    Buffer.from('# Zucchini bread\n\nGrate two zucchini, fold in walnuts and bake for an hour.'),
    { projectId: ids.project },
  );
  ids.recipes = recipes.fileId;
  for (const fileId of [ids.travel, ids.recipes])
    await h.http().post('/api/v1/files/ingest-document').set(alice.auth).send({ fileId }).expect(200);
  await h
    .http()
    .patch('/api/v1/files/share')
    .set(alice.auth)
    .send({ fileId: ids.recipes, add: [bob.userId] })
    .expect(200);
  ids.bobsNote = (
    await post(h, bob, '/api/v1/notes', { title: 'Tomatoes', content: 'Bob grows tomatoes, basil and zucchini near the Alfama hotel.' })
  ).note.noteId;
  await h.runtime.indexer.runOnce();
  return ids;
}

/** A logger keeping its warn and error entries. */
function capturingLogger() {
  const entries: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      entries.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return {
    entries,
    logger: winston.createLogger({ level: 'warn', format: winston.format.json(), transports: [new winston.transports.Stream({ stream })] }),
  };
}

describe('grounded chat through the development model', () => {
  const logs = capturingLogger();
  const ctx = {} as { h: Harness; alice: TestUser; bob: TestUser; carol: TestUser };
  let ids: Record<string, string> = {};
  beforeAll(async () => {
    ctx.h = await startHarness(env()(), { logger: logs.logger });
    ctx.alice = await ctx.h.newUser('alice');
    ctx.bob = await ctx.h.newUser('bob');
    ctx.carol = await ctx.h.newUser('carol');
    ids = await seed(ctx.h, ctx.alice, ctx.bob);
  });
  afterAll(() => ctx.h?.close());

  test('knowledge: true cites the best results; the reply stores them and the model lists them', async () => {
    const { h, alice } = ctx;
    const conversationId = await conversation(h, alice);
    const before = await metric(h, 'chat_grounded_turns_total');
    const res = await send(h, alice, { conversationId, content: 'Which hotel near Alfama did I book?', knowledge: true });
    expect(res.status).toBe(200);
    const { message, reply } = res.body as { message: Message; reply: Message };
    expect(message.citations).toEqual([]);
    expect(reply.status).toBe('complete');
    const first = reply.citations[0]!;
    expect(first).toEqual({
      number: 1,
      sourceType: 'file',
      sourceId: ids.travel,
      title: 'travel.md',
      snippet: expect.stringContaining('«Alfama»'),
      highlights: expect.any(Array),
      projectId: null,
      fileId: ids.travel,
      chunkIndex: 0,
      startOffset: expect.any(Number),
      endOffset: expect.any(Number),
    });
    expect(first.highlights.length).toBeGreaterThan(0);
    expect(reply.citations.map((c) => c.number)).toEqual(reply.citations.map((_, i) => i + 1));
    expect(reply.citations.length).toBeLessThanOrEqual(5);
    // The development model lists the sources its prompt carried, in order.
    expect(reply.content).toContain(`Sources: ${reply.citations.map((c) => `[${c.number}] ${c.title}`).join('; ')}`);
    // Stored with the reply, as the messages route shows it.
    const [storedReply, storedMessage] = await messages(h, alice, conversationId);
    expect(storedReply).toEqual(asListed(reply));
    expect(storedMessage).toEqual(asListed(message));
    expect(await metric(h, 'chat_grounded_turns_total')).not.toEqual(before);
    expect(await metric(h, 'chat_grounded_turns_total')).toMatch(/chat_grounded_turns_total\{outcome="grounded"\} [1-9]/);
    expect(await metric(h, 'chat_grounding_sources_total')).toMatch(/chat_grounding_sources_total [1-9]/);
  });

  test('the knowledgeInChat setting grounds turns that do not say; knowledge: false overrides it', async () => {
    const { h, alice } = ctx;
    const conversationId = await conversation(h, alice);
    const plain = await send(h, alice, { conversationId, content: 'What goes in the raised bed? tomatoes basil' });
    expect(plain.status).toBe(200);
    expect(plain.body.reply.citations).toEqual([]);
    expect(plain.body.reply.content).not.toContain('Sources:');

    await h.http().patch('/api/v1/settings').set(alice.auth).send({ knowledgeInChat: true }).expect(200);
    try {
      const grounded = await send(h, alice, { conversationId, content: 'What goes in the raised bed? tomatoes basil' });
      expect(grounded.status).toBe(200);
      expect(grounded.body.reply.citations[0]).toMatchObject({ number: 1, sourceType: 'note', sourceId: ids.garden, title: 'Garden plan' });
      expect(grounded.body.reply.content).toContain('Sources: [1] Garden plan');

      const off = await send(h, alice, { conversationId, content: 'What goes in the raised bed? tomatoes basil', knowledge: false });
      expect(off.body.reply.citations).toEqual([]);
      expect(off.body.reply.content).not.toContain('Sources:');

      // memoryInChat off: memory items are not sources.
      await h.http().patch('/api/v1/settings').set(alice.auth).send({ memoryInChat: false }).expect(200);
      const noMemory = await send(h, alice, { conversationId, content: 'Am I allergic to peanuts or shellfish?' });
      expect(noMemory.body.reply.citations.map((c: Citation) => c.sourceType)).not.toContain('memory');
      await h.http().patch('/api/v1/settings').set(alice.auth).send({ memoryInChat: null }).expect(200);
      const withMemory = await send(h, alice, { conversationId, content: 'Am I allergic to peanuts or shellfish?' });
      expect(withMemory.body.reply.citations[0]).toMatchObject({ sourceType: 'memory', sourceId: ids.allergy });
    } finally {
      await h.http().patch('/api/v1/settings').set(alice.auth).send({ knowledgeInChat: null, memoryInChat: null }).expect(200);
    }
  });

  test('a streamed grounded reply sends its citations before the first delta and on the final message', async () => {
    const { h, alice } = ctx;
    const conversationId = await conversation(h, alice);
    const res = await send(h, alice, { conversationId, content: 'hotel Alfama', knowledge: true, stream: true })
      .buffer(true)
      .parse(textBody);
    expect(res.status).toBe(200);
    const events = parseEvents(res.body as string);
    const names = events.map((e) => e.event);
    expect(names.slice(0, 2)).toEqual(['message', 'citations']);
    expect(names.at(-1)).toBe('done');
    expect(names.slice(2, -1).every((n) => n === 'delta')).toBe(true);
    const citations = events[1]!.data.citations as Citation[];
    expect(events[1]!.data.retrieval).toBe(h.runtime.services.knowledge.vectorAvailable ? 'hybrid' : 'lexical');
    expect(citations[0]).toMatchObject({ number: 1, sourceType: 'file', sourceId: ids.travel });
    const done = events.at(-1)!.data.message as Message;
    expect(done.citations).toEqual(citations);
    expect(
      events
        .filter((e) => e.event === 'delta')
        .map((e) => e.data.text)
        .join(''),
    ).toBe(done.content);
    expect((await messages(h, alice, conversationId))[0]).toEqual(asListed(done));
  });

  test('chat.completed carries the citations', async () => {
    const { h } = ctx;
    const user = await h.newUser('hooks');
    const noteId = (
      await post(h, user, '/api/v1/notes', { title: 'Sailing', content: 'The regatta starts at the northern harbour at nine.' })
    ).note.noteId;
    await h.runtime.indexer.runOnce();
    const { secret } = await subscribe(h, user, `${servers.receiver.url}/grounded`, ['chat.completed']);
    const conversationId = await conversation(h, user);
    const res = await send(h, user, { conversationId, content: 'When does the regatta start?', knowledge: true });
    expect(res.status).toBe(200);
    expect(res.body.reply.citations[0]).toMatchObject({ sourceType: 'note', sourceId: noteId });
    const request = await eventually(() => servers.receiver.received.find((r) => r.path === '/hook/grounded'));
    const event = verify(secret, request);
    expect(event).toMatchObject({ type: 'chat.completed', data: { conversationId, messageId: res.body.reply.messageId } });
    expect(event.data.citations).toEqual(res.body.reply.citations);
  });

  test('a user’s grounded turn cites only their own records and files shared with them', async () => {
    const { h, alice, bob } = ctx;
    const alicePrivate = new Set([ids.project, ids.garden, ids.allergy, ids.travel]);
    const bobsConversation = await conversation(h, bob);
    const cited = new Set<string>();
    for (const content of [
      'tomatoes basil raised bed',
      'Alfama hotel river',
      'peanuts shellfish allergy',
      'zucchini walnuts bread',
      'Travel plans Trips',
    ]) {
      const res = await send(h, bob, { conversationId: bobsConversation, content, knowledge: true });
      expect(res.status).toBe(200);
      for (const c of res.body.reply.citations as Citation[]) {
        expect(alicePrivate.has(c.sourceId)).toBe(false);
        expect([ids.bobsNote, ids.recipes]).toContain(c.sourceId);
        cited.add(c.sourceId);
      }
    }
    // Alice's file shared with Bob may be cited (knowledge search reads it), without her project.
    expect(cited).toEqual(new Set([ids.bobsNote, ids.recipes]));
    const shared = (
      (await send(h, bob, { conversationId: bobsConversation, content: 'zucchini walnuts', knowledge: true })).body.reply
        .citations as Citation[]
    ).find((c) => c.sourceId === ids.recipes);
    expect(shared).toMatchObject({ sourceType: 'file', sourceId: ids.recipes, fileId: ids.recipes, title: 'recipes.md', projectId: null });
    // Alice's own turn cites her file with its project, and never Bob's note.
    const alicesConversation = await conversation(h, alice);
    const own = await send(h, alice, { conversationId: alicesConversation, content: 'zucchini walnuts tomatoes Alfama', knowledge: true });
    const aliceCited = own.body.reply.citations as Citation[];
    expect(aliceCited.map((c) => c.sourceId)).not.toContain(ids.bobsNote);
    expect(aliceCited.find((c) => c.sourceId === ids.recipes)).toMatchObject({ projectId: ids.project });
    // Once unshared, Bob's turns no longer cite it.
    await h
      .http()
      .patch('/api/v1/files/share')
      .set(alice.auth)
      .send({ fileId: ids.recipes, remove: [bob.userId] })
      .expect(200);
    try {
      const after = await send(h, bob, { conversationId: bobsConversation, content: 'zucchini walnuts bread', knowledge: true });
      expect((after.body.reply.citations as Citation[]).map((c) => c.sourceId)).not.toContain(ids.recipes);
    } finally {
      await h
        .http()
        .patch('/api/v1/files/share')
        .set(alice.auth)
        .send({ fileId: ids.recipes, add: [bob.userId] })
        .expect(200);
    }
  });

  test('nothing found: citations [] and the model is told none matched', async () => {
    const { h, carol } = ctx;
    const conversationId = await conversation(h, carol);
    const res = await send(h, carol, { conversationId, content: 'tomatoes basil Alfama zucchini', knowledge: true });
    expect(res.status).toBe(200);
    expect(res.body.reply.citations).toEqual([]);
    expect(res.body.reply.content).toContain('Sources: none of your knowledge matched.');
    const streamed = await send(h, carol, { conversationId, content: 'tomatoes', knowledge: true, stream: true })
      .buffer(true)
      .parse(textBody);
    const events = parseEvents(streamed.body as string);
    expect(events[1]).toMatchObject({ event: 'citations', data: { citations: [] } });
    expect(await metric(h, 'chat_grounded_turns_total')).toMatch(/chat_grounded_turns_total\{outcome="empty"\} [1-9]/);
  });

  test('a knowledge search that fails leaves the turn ungrounded, saying so', async () => {
    const { h, alice } = ctx;
    const conversationId = await conversation(h, alice);
    const db = h.runtime.database.db;
    // A real failure of the search's SQL: the chunks' table is briefly missing.
    await sql`alter table file_chunks rename to file_chunks_away`.execute(db);
    let res;
    try {
      res = await send(h, alice, { conversationId, content: 'hotel Alfama', knowledge: true });
    } finally {
      await sql`alter table file_chunks_away rename to file_chunks`.execute(db);
    }
    expect(res.status).toBe(200);
    expect(res.body.reply).toMatchObject({ status: 'complete', citations: [] });
    expect(res.body.reply.content).toContain('Sources: unavailable (your knowledge could not be searched).');
    expect(await metric(h, 'chat_grounded_turns_total')).toMatch(/chat_grounded_turns_total\{outcome="failed"\} 1/);
    expect(logs.entries).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        message: 'knowledge retrieval failed; the chat turn goes on without sources',
        messageId: res.body.reply.messageId,
      }),
    );
    // And searching works again.
    expect((await send(h, alice, { conversationId, content: 'hotel Alfama', knowledge: true })).body.reply.citations[0]).toMatchObject({
      sourceId: ids.travel,
    });
  });

  test('knowledge must be a boolean (400, nothing posted); another user’s conversation is 404', async () => {
    const { h, alice, bob } = ctx;
    const conversationId = await conversation(h, alice);
    for (const knowledge of ['yes', 1, null, {}]) {
      const res = await send(h, alice, { conversationId, content: 'hotel Alfama', knowledge });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_request', details: [expect.objectContaining({ path: '/body/knowledge' })] });
    }
    expect(await messages(h, alice, conversationId)).toEqual([]);
    const foreign = await send(h, bob, { conversationId, content: 'hotel Alfama', knowledge: true });
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe('not_found');
    expect(await messages(h, alice, conversationId)).toEqual([]);
  });
});

describe('grounded chat through an OpenAI-format model server', () => {
  // Embeddings from the same local server, answering nothing: retrieval is lexical, never a failure.
  const ctx = useHarnessWith(
    () =>
      env({
        MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
        MODEL_PROVIDER_MODELS: 'test-model',
        EMBEDDINGS_PROVIDER: 'http',
        EMBEDDINGS_BASE_URL: servers.model.baseUrl,
        EMBEDDINGS_DIMENSIONS: '256',
      })(),
    'alice',
    'bob',
  );
  let ids: Record<string, string> = {};
  beforeAll(async () => {
    servers.model.catalogue.embeddingDimensions = 256;
    ids = await seed(ctx.h, ctx.alice, ctx.bob);
  });
  afterAll(() => {
    servers.model.catalogue.embeddingDimensions = 256;
  });
  beforeEach(() => {
    servers.model.behaviour = () => ({ kind: 'reply', chunks: ['You planted tomatoes', ' [1].'] });
  });

  const systemPrompt = () => servers.model.requests.at(-1)!.body.messages.find((m) => m.role === 'system')!.content;

  test('the model receives the numbered sources and the instruction to cite them', async () => {
    const { h, alice } = ctx;
    const conversationId = await conversation(h, alice);
    const res = await send(h, alice, { conversationId, content: 'What did I plant with the basil? tomatoes', knowledge: true });
    expect(res.status).toBe(200);
    expect(res.body.reply).toMatchObject({ content: 'You planted tomatoes [1].', model: 'test-model' });
    const citations = res.body.reply.citations as Citation[];
    expect(citations[0]).toMatchObject({ number: 1, sourceType: 'note', sourceId: ids.garden, title: 'Garden plan' });
    const system = systemPrompt();
    expect(system).toContain('cite each one you use by its number in square brackets, as [1]');
    expect(system).toContain('[1] (note) Garden plan\n> Garden plan\n> Plant tomatoes and basil in the raised bed this spring.');
    for (const c of citations) expect(system).toContain(`[${c.number}] (${c.sourceType}) ${c.title}`);
    // Bob's note with the same words is not in Alice's prompt.
    expect(system).not.toContain('Bob grows tomatoes');
    // An ungrounded turn's prompt has no sources.
    await send(h, alice, { conversationId, content: 'tomatoes', knowledge: false }).expect(200);
    expect(systemPrompt()).not.toContain("Sources from the user's knowledge");
  });

  test('embeddings that are down make retrieval lexical; the turn is still grounded and streamed', async () => {
    const { h, bob } = ctx;
    servers.model.catalogue.embeddingDimensions = null;
    try {
      const conversationId = await conversation(h, bob);
      const res = await send(h, bob, { conversationId, content: 'zucchini walnuts', knowledge: true, stream: true })
        .buffer(true)
        .parse(textBody);
      const events = parseEvents(res.body as string);
      expect(events[1]).toMatchObject({ event: 'citations', data: { retrieval: 'lexical' } });
      const citations = events[1]!.data.citations as Citation[];
      expect(citations.map((c) => c.sourceId)).toContain(ids.recipes);
      expect(events.at(-1)).toMatchObject({ event: 'done', data: { message: { content: 'You planted tomatoes [1].', citations } } });
      expect(systemPrompt()).toContain('(file) recipes.md\n> # Zucchini bread');
      expect(systemPrompt()).not.toContain('Lisbon');
    } finally {
      servers.model.catalogue.embeddingDimensions = 256;
    }
  });

  test('a model failure keeps the citations on the failed reply', async () => {
    const { h, alice } = ctx;
    servers.model.behaviour = () => ({ kind: 'error', status: 500, message: 'upstream overloaded' });
    const conversationId = await conversation(h, alice);
    const res = await send(h, alice, { conversationId, content: 'hotel Alfama', knowledge: true });
    expect(res.status).toBe(502);
    const [reply] = await messages(h, alice, conversationId);
    expect(reply).toMatchObject({ status: 'failed', errorCode: 'model_provider_error' });
    expect(reply!.citations[0]).toMatchObject({ sourceType: 'file', sourceId: ids.travel });
  });
});
