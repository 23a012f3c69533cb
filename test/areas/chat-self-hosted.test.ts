import { Writable } from 'node:stream';
import winston from 'winston';
import { ConfigError } from '../../src/config';
import { type Harness, startHarness, textBody, useHarnessWith } from '../helpers/harness';
import { parseEvents, startFakeModel, useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually, subscribe, verify } from '../helpers/receiver';

// A self-hosted provider (Ollama, vLLM): model ids with ":" and "/", and no MODEL_PROVIDER_MODELS,
// so the service reads the provider's own model list at start.
const SELF_HOSTED = ['qwen2.5:7b-instruct', 'llama3.1:8b', 'meta-llama/Llama-3.1-8B-Instruct'];
const servers = useFakeModelAndReceiver();
const ctx = useHarnessWith(() => {
  servers.model.catalogue.models = SELF_HOSTED;
  return { MODEL_PROVIDER_BASE_URL: servers.model.baseUrl, WEBHOOK_ALLOW_LOOPBACK: 'true', WEBHOOK_POLL_INTERVAL_MS: '20' };
}, 'alice');

/** A logger keeping its warn and error entries (the access log stays off below info). */
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

describe('a self-hosted OpenAI-compatible provider without MODEL_PROVIDER_MODELS', () => {
  test('offers the models its list names, ids with ":" and "/" intact, the first the default', async () => {
    const res = await ctx.h.http().get('/api/v1/models').set(ctx.alice.auth);
    expect(res.status).toBe(200);
    expect(res.body.models.map((m: { modelId: string; default: boolean }) => [m.modelId, m.default])).toEqual([
      ['qwen2.5:7b-instruct', true],
      ['llama3.1:8b', false],
      ['meta-llama/Llama-3.1-8B-Instruct', false],
    ]);
  });

  test('streams a reply end to end from a model whose id has ":" and "/"', async () => {
    servers.model.behaviour = () => ({ kind: 'reply', chunks: ['Bonjour', ' !'] });
    for (const model of ['llama3.1:8b', 'meta-llama/Llama-3.1-8B-Instruct']) {
      const created = await ctx.h.http().post('/api/v1/conversations').set(ctx.alice.auth).send({ model });
      expect(created.status).toBe(200);
      const conversationId = created.body.conversation.conversationId;
      const res = await ctx.h
        .http()
        .post('/api/v1/conversations/messages')
        .set(ctx.alice.auth)
        .send({ conversationId, content: 'Salut', stream: true })
        .buffer(true)
        .parse(textBody);
      expect(res.status).toBe(200);
      const events = parseEvents(res.body as string);
      expect(
        events
          .filter((e) => e.event === 'delta')
          .map((e) => e.data.text)
          .join(''),
      ).toBe('Bonjour !');
      expect(events.at(-1)).toMatchObject({ event: 'done', data: { message: { status: 'complete', model, content: 'Bonjour !' } } });
      expect(servers.model.requests.at(-1)!.body).toMatchObject({ model, stream: true });
    }
  });

  test('MODEL_PROVIDER_MODELS takes ids with ":" and "/", prices only in the last two whole numbers', async () => {
    const h = await startHarness({
      MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
      MODEL_PROVIDER_MODELS: 'llama3.1:8b:15:60,meta-llama/Llama-3.1-8B,qwen2.5:7b',
    });
    try {
      const user = await h.newUser();
      const res = await h.http().get('/api/v1/models').set(user.auth);
      expect(
        res.body.models.map((m: Record<string, unknown>) => [m.modelId, m.inputCentsPerMillionTokens, m.outputCentsPerMillionTokens]),
      ).toEqual([
        ['llama3.1:8b', 15, 60],
        ['meta-llama/Llama-3.1-8B', 0, 0],
        ['qwen2.5:7b', 0, 0],
      ]);
    } finally {
      await h.close();
    }
  });

  test('a model list that cannot be read stops the start with a message saying so', async () => {
    const silent = await startFakeModel();
    silent.catalogue.models = null;
    try {
      const started = startHarness({ MODEL_PROVIDER_BASE_URL: silent.baseUrl });
      await expect(started).rejects.toBeInstanceOf(ConfigError);
      await expect(started).rejects.toThrow(
        /MODEL_PROVIDER_MODELS is not set.*could not be read: The model provider answered 404: no model list here/,
      );
    } finally {
      await silent.close();
    }
  });
});

describe('provider failures seen by API callers', () => {
  let h: Harness;
  const logs = capturingLogger();
  beforeAll(async () => {
    const down = await startFakeModel();
    const baseUrl = down.baseUrl;
    await down.close(); // nothing listens there any more: connections are refused
    h = await startHarness(
      {
        MODEL_PROVIDER_BASE_URL: baseUrl,
        MODEL_PROVIDER_MODELS: 'test-model',
        WEBHOOK_ALLOW_LOOPBACK: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '20',
      },
      { logger: logs.logger },
    );
  });
  afterAll(() => h?.close());

  test('an unreachable provider: 502, stored reason and chat.failed name no address; the detail is logged once at warn', async () => {
    const user = await h.newUser();
    const { secret } = await subscribe(h, user, `${servers.receiver.url}/unreachable`, ['chat.failed']);
    const conversationId = (await h.http().post('/api/v1/conversations').set(user.auth).send({})).body.conversation.conversationId;
    const res = await h.http().post('/api/v1/conversations/messages').set(user.auth).send({ conversationId, content: 'Hi' });
    expect(res.status).toBe(502);
    expect(res.body).toEqual({
      code: 'model_provider_error',
      error: 'The model provider could not be reached: the connection was refused (nothing listens at that address and port).',
      messageId: expect.any(String),
    });
    const stored = await h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(user.auth);
    const reply = stored.body.messages.find((m: { messageId: string }) => m.messageId === res.body.messageId);
    expect(reply).toMatchObject({
      status: 'failed',
      errorCode: 'model_provider_error',
      errorMessage: 'The model provider could not be reached: the connection was refused (nothing listens at that address and port).',
    });
    const hook = await eventually(() => servers.receiver.received.find((r) => r.path === '/hook/unreachable'));
    expect(verify(secret, hook).data).toMatchObject({
      errorCode: 'model_provider_error',
      error: 'The model provider could not be reached: the connection was refused (nothing listens at that address and port).',
    });
    for (const text of [JSON.stringify(res.body), JSON.stringify(reply), hook.body.toString()])
      expect(text).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|localhost/);

    const failures = logs.entries.filter((e) => e.message === 'model provider failed');
    expect(failures).toEqual([
      expect.objectContaining({ level: 'warn', model: 'test-model', detail: expect.stringMatching(/ECONNREFUSED/) }),
    ]);
    expect(logs.entries.filter((e) => e.level === 'error' || 'stack' in e)).toEqual([]);
  });
});
