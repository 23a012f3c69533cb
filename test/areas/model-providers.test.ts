import { Writable } from 'node:stream';
import { sql } from 'kysely';
import type supertest from 'supertest';
import winston from 'winston';
import { describeCrudContract } from '../helpers/crud-contract';
import { startFakeAnthropic, type FakeAnthropicServer } from '../helpers/anthropic-server';
import { type Harness, startHarness, type TestUser, textBody, userNamed } from '../helpers/harness';
import { type FakeModelServer, parseEvents, startFakeModel } from '../helpers/openai-server';
import { redactSecrets } from '../../src/platform/logger';

// Keys long and distinctive enough that any copy of them (in a body, a log line, an audit event or
// a database column) is found by a plain search.
const ANTHROPIC_KEY = 'sk-ant-api03-ALICE-SECRET-4f1c9a7e2b6d8035';
const OLLAMA_KEY = 'ollama-key-ALICE-SECRET-9d2e7b1c5a3f8046';
const WRONG_KEY = 'sk-ant-api03-WRONG-SECRET-0c3b8e2a7f1d9564';
const KEYS = [ANTHROPIC_KEY, OLLAMA_KEY, WRONG_KEY];
const ROOT = 'root-admin';

let anthropic: FakeAnthropicServer;
let ollama: FakeModelServer;
let h: Harness;
let alice: TestUser;
let bob: TestUser;
let admin: TestUser;
let stdoutSpy: jest.SpyInstance | undefined;
/** Every log entry the service wrote, at every level, and its access log lines. */
const logLines: string[] = [];
/** Every response body the tests received. */
const bodies: string[] = [];

beforeAll(async () => {
  anthropic = await startFakeAnthropic(ANTHROPIC_KEY);
  ollama = await startFakeModel(() => ({ kind: 'reply', chunks: ['Bonjour', ' de', ' Llama.'], usage: { prompt: 9, completion: 4 } }));
  ollama.catalogue.models = ['llama3.1:8b', 'nomic-embed-text'];
  ollama.catalogue.requiredKey = OLLAMA_KEY;
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logLines.push(chunk.toString());
      done();
    },
  });
  const logger = winston.createLogger({
    level: 'debug',
    format: winston.format.combine(redactSecrets(), winston.format.json()),
    transports: [new winston.transports.Stream({ stream })],
  });
  // The access log writes its lines to stdout itself: kept with the others (and out of the test output).
  const write = process.stdout.write.bind(process.stdout);
  stdoutSpy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
    const text = chunk.toString();
    if (!text.startsWith('{"level":"info","message":"request"')) return write(chunk, ...(rest as []));
    logLines.push(text);
    return true;
  });
  h = await startHarness({ OUTBOUND_ALLOW_LOOPBACK: 'true', BOOTSTRAP_ADMIN_USER_IDS: ROOT, CAPABILITY_CACHE_MS: '0' }, { logger });
  alice = await h.newUser('alice');
  bob = await h.newUser('bob');
  admin = await userNamed(h, ROOT);
});

afterAll(async () => {
  stdoutSpy?.mockRestore();
  await h?.close();
  await anthropic?.close();
  await ollama?.close();
});

/** Sends a request and keeps its response body for the search for keys. */
async function call(req: supertest.Test): Promise<supertest.Response> {
  const res = await req;
  bodies.push(typeof res.body === 'string' ? res.body : `${res.text ?? ''} ${JSON.stringify(res.body)}`);
  return res;
}

const connect = (user: TestUser, body: Record<string, unknown>) => call(h.http().post('/api/v1/model-providers').set(user.auth).send(body));
const test_ = (user: TestUser, body: Record<string, unknown>) =>
  call(h.http().post('/api/v1/model-providers/test').set(user.auth).send(body));
const models = async (user: TestUser) =>
  (await call(h.http().get('/api/v1/models').set(user.auth))).body.models as Array<Record<string, unknown>>;

/** Sends a streamed message in a new conversation on `model`; the events and the final message. */
async function streamChat(user: TestUser, model: string, content: string) {
  const created = await call(h.http().post('/api/v1/conversations').set(user.auth).send({ model }));
  expect(created.status).toBe(200);
  const conversationId = created.body.conversation.conversationId as string;
  const res = await call(
    h
      .http()
      .post('/api/v1/conversations/messages')
      .set(user.auth)
      .send({ conversationId, content, stream: true })
      .buffer(true)
      .parse(textBody),
  );
  expect(res.status).toBe(200);
  const events = parseEvents(res.body as unknown as string);
  return { events, done: events.at(-1)!.data as { message: { messageId: string; status: string } } };
}

let anthropicId: string;
let ollamaId: string;

describe('connections', () => {
  test('an Anthropic connection: saved untested, its key write-only, tested against the provider', async () => {
    const created = await connect(alice, {
      kind: 'anthropic',
      name: 'My Anthropic key',
      baseUrl: anthropic.baseUrl,
      apiKey: ANTHROPIC_KEY,
    });
    expect(created.status).toBe(200);
    expect(created.body.connection).toMatchObject({
      kind: 'anthropic',
      name: 'My Anthropic key',
      baseUrl: anthropic.baseUrl,
      hasApiKey: true,
      status: 'untested',
      models: [],
      lastError: null,
      lastTestedAt: null,
    });
    anthropicId = created.body.connection.connectionId;

    const tested = await test_(alice, { connectionId: anthropicId });
    expect(tested.status).toBe(200);
    expect(tested.body.result).toMatchObject({ ok: true, models: ['claude-sonnet-4-5', 'claude-haiku-4-5'], error: null });
    expect(tested.body.connection).toMatchObject({
      status: 'active',
      models: ['claude-sonnet-4-5', 'claude-haiku-4-5'],
      lastTestedAt: expect.any(Number),
    });
    expect(anthropic.requests.at(-1)).toMatchObject({ path: '/v1/models', apiKey: ANTHROPIC_KEY, version: '2023-06-01' });
  });

  test('an OpenAI-compatible connection (Ollama) needs a base URL, and lists model ids with ":"', async () => {
    const missing = await connect(alice, { kind: 'openai_compatible', name: 'Ollama', apiKey: OLLAMA_KEY });
    expect(missing.status).toBe(400);
    expect(missing.body.details).toEqual([expect.objectContaining({ path: '/body/baseUrl' })]);
    const created = await connect(alice, {
      kind: 'openai_compatible',
      name: 'Ollama',
      baseUrl: ollama.baseUrl,
      apiKey: OLLAMA_KEY,
      enabledModels: ['llama3.1:8b'],
    });
    expect(created.status).toBe(200);
    ollamaId = created.body.connection.connectionId;
    const tested = await test_(alice, { connectionId: ollamaId });
    expect(tested.body).toMatchObject({
      result: { ok: true, models: ['llama3.1:8b', 'nomic-embed-text'] },
      connection: { status: 'active', enabledModels: ['llama3.1:8b'] },
    });
  });

  test('a draft is tested without being saved; a refused key is a failed test that never echoes the key', async () => {
    const before = (await call(h.http().get('/api/v1/model-providers').set(alice.auth))).body.connections.length;
    const good = await test_(alice, { kind: 'anthropic', baseUrl: anthropic.baseUrl, apiKey: ANTHROPIC_KEY });
    expect(good.body).toEqual({
      result: { ok: true, models: ['claude-sonnet-4-5', 'claude-haiku-4-5'], error: null, testedAt: expect.any(Number) },
    });
    const refused = await test_(alice, { kind: 'anthropic', baseUrl: anthropic.baseUrl, apiKey: WRONG_KEY });
    expect(refused.status).toBe(200);
    expect(refused.body.result).toMatchObject({
      ok: false,
      models: [],
      error: expect.stringMatching(/^The model provider answered 401: invalid x-api-key: \[api key\]/),
    });
    // The provider did receive the wrong key (and echoed it): the service removed it.
    expect(anthropic.requests.at(-1)?.apiKey).toBe(WRONG_KEY);
    expect((await call(h.http().get('/api/v1/model-providers').set(alice.auth))).body.connections).toHaveLength(before);
  });

  test('a saved connection whose key is refused turns error, with lastError and no key', async () => {
    const created = await connect(alice, { kind: 'anthropic', name: 'Old key', baseUrl: anthropic.baseUrl, apiKey: WRONG_KEY });
    const tested = await test_(alice, { connectionId: created.body.connection.connectionId });
    expect(tested.body.connection).toMatchObject({ status: 'error', lastError: expect.stringContaining('401'), models: [] });
    expect(tested.body.connection.lastError).not.toContain(WRONG_KEY);
    // A new key sets it back to untested.
    const patched = await call(
      h
        .http()
        .patch('/api/v1/model-providers')
        .set(alice.auth)
        .send({ connectionId: created.body.connection.connectionId, apiKey: ANTHROPIC_KEY }),
    );
    expect(patched.body.connection).toMatchObject({ status: 'untested', lastError: null, hasApiKey: true });
    const removed = await call(
      h.http().patch('/api/v1/model-providers').set(alice.auth).send({ connectionId: created.body.connection.connectionId, apiKey: null }),
    );
    expect(removed.body.connection.hasApiKey).toBe(false);
    await call(h.http().delete('/api/v1/model-providers').query({ connectionId: created.body.connection.connectionId }).set(alice.auth));
  });

  test('the deployment providers stay in the published shape beside the connections', async () => {
    const res = await call(h.http().get('/api/v1/model-providers').set(alice.auth));
    expect(res.body.providers).toEqual([expect.objectContaining({ providerId: 'builtin-development', kind: 'builtin-development' })]);
    expect(res.body.connections.map((c: { connectionId: string }) => c.connectionId)).toEqual([ollamaId, anthropicId]);
    expect(res.body.nextCursor).toBeNull();
    const one = await call(h.http().get('/api/v1/model-providers').query({ connectionId: anthropicId }).set(alice.auth));
    expect(one.body.connection).toMatchObject({ connectionId: anthropicId, hasApiKey: true });
  });

  test("another user's connection is 404 on every route, and unchanged", async () => {
    const before = (await call(h.http().get('/api/v1/model-providers').query({ connectionId: anthropicId }).set(alice.auth))).body
      .connection;
    const attempts = [
      h.http().get('/api/v1/model-providers').query({ connectionId: anthropicId }).set(bob.auth),
      h.http().patch('/api/v1/model-providers').set(bob.auth).send({ connectionId: anthropicId, name: 'Mine now' }),
      h.http().delete('/api/v1/model-providers').query({ connectionId: anthropicId }).set(bob.auth),
      h.http().post('/api/v1/model-providers/test').set(bob.auth).send({ connectionId: anthropicId }),
    ];
    for (const attempt of attempts) {
      const res = await call(attempt);
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect((await call(h.http().get('/api/v1/model-providers').set(bob.auth))).body.connections).toEqual([]);
    expect((await models(bob)).some((m) => m.connectionId !== null)).toBe(false);
    // Bob cannot call Alice's models either: they are not among his.
    const conversation = await call(
      h
        .http()
        .post('/api/v1/conversations')
        .set(bob.auth)
        .send({ model: `${anthropicId}/claude-sonnet-4-5` }),
    );
    expect(conversation.status).toBe(400);
    expect(
      (await call(h.http().get('/api/v1/model-providers').query({ connectionId: anthropicId }).set(alice.auth))).body.connection,
    ).toEqual(before);
  });

  test('a base URL on a private, link-local or metadata address is refused at save, update and test', async () => {
    for (const baseUrl of [
      'http://10.0.0.7/v1',
      'http://169.254.169.254/latest',
      'http://[fd00:ec2::254]/v1',
      'http://192.168.1.20:11434/v1',
      'ftp://example.com/v1',
    ]) {
      const created = await connect(alice, { kind: 'openai_compatible', name: 'LAN', baseUrl });
      expect(created.status).toBe(400);
      expect(created.body.details).toEqual([expect.objectContaining({ path: '/body/baseUrl' })]);
      const patched = await call(h.http().patch('/api/v1/model-providers').set(alice.auth).send({ connectionId: ollamaId, baseUrl }));
      expect(patched.status).toBe(400);
      const tested = await test_(alice, { kind: 'openai_compatible', baseUrl });
      expect(tested.status).toBe(400);
    }
  });

  test('bad test requests are 400: both a saved connection and a draft, or neither', async () => {
    expect((await test_(alice, {})).status).toBe(400);
    expect((await test_(alice, { connectionId: anthropicId, kind: 'anthropic' })).status).toBe(400);
    expect((await test_(alice, { apiKey: 'x' })).status).toBe(400);
    expect((await test_(alice, { kind: 'openai_compatible' })).status).toBe(400);
  });
});

describe('models through connections', () => {
  test('GET /models merges the deployment model and the connections’ models, named <connectionId>/<id>', async () => {
    const list = await models(alice);
    expect(list[0]).toMatchObject({
      modelId: 'development',
      connectionId: null,
      kinds: ['chat', 'vision'],
      default: true,
      defaultFor: ['chat'],
    });
    const own = list.filter((m) => m.connectionId !== null);
    expect(own.map((m) => m.modelId)).toEqual([
      `${anthropicId}/claude-sonnet-4-5`,
      `${anthropicId}/claude-haiku-4-5`,
      `${ollamaId}/llama3.1:8b`,
    ]);
    expect(own[0]).toMatchObject({
      providerId: 'anthropic',
      name: 'claude-sonnet-4-5',
      kinds: ['chat', 'tools', 'vision'],
      inputCentsPerMillionTokens: 0,
      default: false,
      defaultFor: [],
    });
  });

  test('a chat streamed through the Anthropic connection: usage recorded with the connection, nothing charged', async () => {
    const model = `${anthropicId}/claude-sonnet-4-5`;
    const { events, done } = await streamChat(alice, model, 'Hello Claude');
    expect(
      events
        .filter((e) => e.event === 'delta')
        .map((e) => e.data.text)
        .join(''),
    ).toBe('Hello from Claude.');
    expect(done.message).toMatchObject({
      status: 'complete',
      model,
      content: 'Hello from Claude.',
      usage: { inputTokens: 12, outputTokens: 7, costCents: 0 },
    });
    const sent = anthropic.requests.at(-1)!;
    expect(sent).toMatchObject({ path: '/v1/messages', apiKey: ANTHROPIC_KEY, body: { model: 'claude-sonnet-4-5', stream: true } });
    expect(JSON.stringify(sent.body?.messages)).toContain('Hello Claude');
    const usage = await sql<{ connection_id: string | null; model: string; cost_micro_cents: number; input_tokens: number }>`
      select connection_id, model, cost_micro_cents::int, input_tokens from usage_records where resource_id = ${done.message.messageId}`.execute(
      h.runtime.database.db,
    );
    expect(usage.rows).toEqual([{ connection_id: anthropicId, model, cost_micro_cents: 0, input_tokens: 12 }]);
    const ledger = await sql<{
      n: number;
    }>`select (select count(*)::int from ledger_entries where user_id = ${alice.userId}) + (select count(*)::int from budgets where user_id = ${alice.userId}) as n`.execute(
      h.runtime.database.db,
    );
    expect(ledger.rows[0]!.n).toBe(0);
  });

  test('a chat streamed through the OpenAI-compatible connection, a model id with ":"', async () => {
    const model = `${ollamaId}/llama3.1:8b`;
    const { events, done } = await streamChat(alice, model, 'Salut');
    expect(
      events
        .filter((e) => e.event === 'delta')
        .map((e) => e.data.text)
        .join(''),
    ).toBe('Bonjour de Llama.');
    expect(done.message).toMatchObject({ status: 'complete', model, usage: { inputTokens: 9, outputTokens: 4, costCents: 0 } });
    expect(ollama.requests.at(-1)).toMatchObject({ authorization: `Bearer ${OLLAMA_KEY}`, body: { model: 'llama3.1:8b', stream: true } });
    const usage = await sql<{
      connection_id: string | null;
    }>`select connection_id from usage_records where resource_id = ${done.message.messageId}`.execute(h.runtime.database.db);
    expect(usage.rows).toEqual([{ connection_id: ollamaId }]);
  });

  test('a model not enabled on its connection is not offered', async () => {
    const res = await call(
      h
        .http()
        .post('/api/v1/conversations')
        .set(alice.auth)
        .send({ model: `${ollamaId}/nomic-embed-text` }),
    );
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([expect.objectContaining({ path: '/body/model' })]);
  });

  test('a dry run of an automation goes through the connection too', async () => {
    const res = await call(
      h
        .http()
        .post('/api/v1/automations/test')
        .set(alice.auth)
        .send({ name: 'Dry', prompt: 'Summarize.', model: `${anthropicId}/claude-haiku-4-5`, execute: true }),
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ valid: true, preview: { content: 'Hello from Claude.' } });
    expect(anthropic.requests.at(-1)).toMatchObject({ path: '/v1/messages', body: { model: 'claude-haiku-4-5' } });
  });

  test('a provider failure through the connection fails the reply without the key', async () => {
    const created = await connect(alice, {
      kind: 'anthropic',
      name: 'Wrong',
      baseUrl: anthropic.baseUrl,
      apiKey: ANTHROPIC_KEY,
      enabledModels: ['claude-sonnet-4-5'],
    });
    const id = created.body.connection.connectionId as string;
    await call(h.http().patch('/api/v1/model-providers').set(alice.auth).send({ connectionId: id, apiKey: WRONG_KEY }));
    const { done } = await streamChat(alice, `${id}/claude-sonnet-4-5`, 'Hi');
    expect(done.message).toMatchObject({ status: 'failed', errorCode: 'model_provider_error' });
    expect(anthropic.requests.at(-1)?.apiKey).toBe(WRONG_KEY);
    await call(h.http().delete('/api/v1/model-providers').query({ connectionId: id }).set(alice.auth));
  });
});

describe('the model policy', () => {
  test('only admins and auditors read it; only admins change it, audited', async () => {
    expect((await call(h.http().get('/api/v1/admin/model-policy').set(alice.auth))).status).toBe(403);
    expect(
      (
        await call(
          h
            .http()
            .patch('/api/v1/admin/model-policy')
            .set(alice.auth)
            .send({ block: ['development'] }),
        )
      ).status,
    ).toBe(403);
    const read = await call(h.http().get('/api/v1/admin/model-policy').set(admin.auth));
    expect(read.body).toEqual({ policy: { allow: null, block: [], updatedAt: null, updatedBy: null } });
    expect((await call(h.http().patch('/api/v1/admin/model-policy').set(admin.auth).send({}))).status).toBe(400);
    expect((await call(h.http().patch('/api/v1/admin/model-policy').set(admin.auth).send({ block: 'x' }))).status).toBe(400);
  });

  test('a blocked model disappears from /models and is refused by chat, automations and dry runs', async () => {
    const blocked = `${anthropicId}/claude-haiku-4-5`;
    // A conversation and an automation saved on it before the block.
    const conversation = await call(h.http().post('/api/v1/conversations').set(alice.auth).send({ model: blocked }));
    const automation = await call(
      h.http().post('/api/v1/automations').set(alice.auth).send({ name: 'Haiku', prompt: 'Write one.', model: blocked }),
    );
    expect(automation.status).toBe(200);

    // Blocked by the provider's model id: it matches in every connection.
    const changed = await call(
      h
        .http()
        .patch('/api/v1/admin/model-policy')
        .set(admin.auth)
        .send({ block: ['claude-haiku-4-5'] }),
    );
    expect(changed.body.policy).toMatchObject({ allow: null, block: ['claude-haiku-4-5'], updatedBy: ROOT });
    const audit = await call(h.http().get('/api/v1/admin/audit').query({ action: 'administration.model_policy.update' }).set(admin.auth));
    expect(audit.body.events[0]).toMatchObject({ action: 'administration.model_policy.update', actorUserId: ROOT, outcome: 'success' });

    expect((await models(alice)).map((m) => m.modelId)).not.toContain(blocked);
    const refusals = [
      h.http().post('/api/v1/conversations').set(alice.auth).send({ model: blocked }),
      h
        .http()
        .patch('/api/v1/conversations')
        .set(alice.auth)
        .send({ conversationId: conversation.body.conversation.conversationId, model: blocked }),
      h
        .http()
        .post('/api/v1/conversations/messages')
        .set(alice.auth)
        .send({ conversationId: conversation.body.conversation.conversationId, content: 'Hi' }),
      h.http().post('/api/v1/automations').set(alice.auth).send({ name: 'Again', prompt: 'p', model: blocked }),
      h.http().post('/api/v1/automations/run').set(alice.auth).send({ automationId: automation.body.automation.automationId }),
    ];
    for (const attempt of refusals) {
      const res = await call(attempt);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    const dry = await call(
      h.http().post('/api/v1/automations/test').set(alice.auth).send({ name: 'Dry', prompt: 'p', model: blocked, execute: true }),
    );
    expect(dry.body).toMatchObject({ valid: false, preview: null, errors: [{ field: '/model', code: 'model_not_allowed' }] });

    // An allow list: only what it names (by full id here) is offered.
    await call(
      h
        .http()
        .patch('/api/v1/admin/model-policy')
        .set(admin.auth)
        .send({ block: [], allow: [`${ollamaId}/llama3.1:8b`] }),
    );
    expect((await models(alice)).map((m) => m.modelId)).toEqual([`${ollamaId}/llama3.1:8b`]);
    // The deployment's default is not allowed: a conversation without a model uses what is left.
    const fallback = await streamChat(alice, `${ollamaId}/llama3.1:8b`, 'Still there?');
    expect(fallback.done.message.status).toBe('complete');
    await call(h.http().patch('/api/v1/admin/model-policy').set(admin.auth).send({ allow: null }));
    expect((await models(alice)).length).toBe(7);
  });
});

describe('the byok capability', () => {
  test('switched off: the connection routes answer capability_disabled, their models disappear and are refused', async () => {
    const off = await call(h.http().patch('/api/v1/admin/capabilities').set(admin.auth).send({ byok: false }));
    expect(off.body.capabilities.byok).toBe(false);
    try {
      const disabled = [
        h.http().post('/api/v1/model-providers').set(alice.auth).send({ kind: 'openai', name: 'x', apiKey: 'k' }),
        h.http().patch('/api/v1/model-providers').set(alice.auth).send({ connectionId: anthropicId, name: 'x' }),
        h.http().delete('/api/v1/model-providers').query({ connectionId: anthropicId }).set(alice.auth),
        h.http().post('/api/v1/model-providers/test').set(alice.auth).send({ connectionId: anthropicId }),
        h.http().get('/api/v1/model-providers').query({ connectionId: anthropicId }).set(alice.auth),
      ];
      for (const attempt of disabled) {
        const res = await call(attempt);
        expect(res.status).toBe(403);
        expect(res.body).toMatchObject({ code: 'capability_disabled', capability: 'byok' });
      }
      const list = await call(h.http().get('/api/v1/model-providers').set(alice.auth));
      expect(list.body).toMatchObject({ connections: [], nextCursor: null, providers: [expect.any(Object)] });
      expect((await models(alice)).map((m) => m.modelId)).toEqual([
        'development',
        'development-image',
        'development-transcription',
        'development-speech',
      ]);
      const refused = await call(
        h
          .http()
          .post('/api/v1/conversations')
          .set(alice.auth)
          .send({ model: `${anthropicId}/claude-sonnet-4-5` }),
      );
      expect(refused.status).toBe(400);
      expect(refused.body.details[0].message).toMatch(/disabled/);
    } finally {
      await call(h.http().patch('/api/v1/admin/capabilities').set(admin.auth).send({ byok: true }));
    }
  });
});

describe('the API key is never shown', () => {
  test('not in any response, log line or audit event; in the database only as ciphertext', async () => {
    const audit = await call(h.http().get('/api/v1/admin/audit').query({ limit: 200 }).set(admin.auth));
    const actions = (audit.body.events as Array<{ action: string }>).map((e) => e.action);
    expect(actions).toEqual(
      expect.arrayContaining(['model_provider.connection.create', 'model_provider.connection.update', 'model_provider.connection.delete']),
    );
    expect(bodies.length).toBeGreaterThan(50);
    expect(logLines.some((line) => line.includes('"operationId":"createModelConnection"'))).toBe(true);
    expect(logLines.some((line) => line.includes('model provider connection test failed'))).toBe(true);
    const stored = await sql<{
      api_key: string | null;
    }>`select api_key from model_connections where id in (${anthropicId}, ${ollamaId})`.execute(h.runtime.database.db);
    expect(stored.rows).toHaveLength(2);
    for (const { api_key } of stored.rows) expect(api_key).toMatch(/^s1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$/);
    const events = await sql<{ metadata: unknown }>`select metadata from audit_events`.execute(h.runtime.database.db);
    const everything = [
      ...bodies,
      ...logLines,
      ...stored.rows.map((r) => r.api_key ?? ''),
      ...events.rows.map((r) => JSON.stringify(r.metadata)),
    ].join('\n');
    for (const key of KEYS) expect(everything).not.toContain(key);
    // The stored key opens only with the deployment's secrets key.
    expect(h.runtime.secrets.open(stored.rows.find((r) => r.api_key)!.api_key!, `model-connection-api-key:${anthropicId}`)).toBe(
      ANTHROPIC_KEY,
    );
  });
});

describe('model providers: the collection contract', () => {
  let contract: Harness;
  beforeAll(async () => {
    contract = await startHarness({ MODEL_CONNECTIONS_PER_USER: '100' });
  });
  afterAll(() => contract.close());
  describeCrudContract(
    {
      path: '/api/v1/model-providers',
      idField: 'connectionId',
      one: 'connection',
      many: 'connections',
      create: (n) => ({ kind: 'openai', name: `Key ${n}`, apiKey: `sk-test-${n}` }),
      update: { name: 'Renamed', enabledModels: ['gpt-4o-mini'] },
      invalidCreates: [
        { name: 'x' },
        { kind: 'mistral', name: 'x' },
        { kind: 'openai', name: '' },
        { kind: 'openai_compatible', name: 'x' },
        { kind: 'openai', name: 'x', apiKey: '' },
      ],
      invalidUpdates: [{ omitId: true }, { name: '' }, { enabledModels: 'all' }, { baseUrl: 'http://10.1.2.3/v1' }],
      projectScoped: false,
    },
    () => contract,
  );

  test('without OUTBOUND_ALLOW_LOOPBACK a loopback base URL is refused', async () => {
    const user = await contract.newUser();
    const res = await contract
      .http()
      .post('/api/v1/model-providers')
      .set(user.auth)
      .send({ kind: 'openai_compatible', name: 'Local', baseUrl: 'http://127.0.0.1:11434/v1' });
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([{ path: '/body/baseUrl', message: expect.stringContaining('loopback') }]);
  });

  test('a user has at most MODEL_CONNECTIONS_PER_USER connections; Idempotency-Key replays a create', async () => {
    const limited = await startHarness({ MODEL_CONNECTIONS_PER_USER: '2' });
    try {
      const user = await limited.newUser();
      const body = { kind: 'openai', name: 'A', apiKey: 'sk-a' };
      const first = await limited.http().post('/api/v1/model-providers').set(user.auth).set('Idempotency-Key', 'create-a').send(body);
      const replay = await limited.http().post('/api/v1/model-providers').set(user.auth).set('Idempotency-Key', 'create-a').send(body);
      expect(replay.body).toEqual(first.body);
      const reused = await limited
        .http()
        .post('/api/v1/model-providers')
        .set(user.auth)
        .set('Idempotency-Key', 'create-a')
        .send({ ...body, name: 'B' });
      expect(reused.status).toBe(422);
      expect(
        (
          await limited
            .http()
            .post('/api/v1/model-providers')
            .set(user.auth)
            .send({ ...body, name: 'B' })
        ).status,
      ).toBe(200);
      const third = await limited
        .http()
        .post('/api/v1/model-providers')
        .set(user.auth)
        .send({ ...body, name: 'C' });
      expect(third.status).toBe(409);
      expect(third.body.code).toBe('conflict');
    } finally {
      await limited.close();
    }
  });
});
