import http from 'node:http';
import net from 'node:net';
import OpenAI from 'openai';
import { type Harness, type TestUser, useHarnessWith } from '../helpers/harness';
import { type FakeModelServer, scriptAnswers, startFakeModel } from '../helpers/openai-server';

// Load shedding (src/http/load-shed.ts): past the in-flight limit or the event-loop delay, a new
// request is answered 503 overloaded at once; probes always answer.
let model: FakeModelServer;
beforeAll(async () => {
  model = await startFakeModel();
});
afterAll(() => model?.close());

const inFlight = useHarnessWith(
  () => ({
    LOAD_SHED_MAX_IN_FLIGHT: '2',
    // The held requests below send half a body and wait: the body-rate rule must not cut them.
    HTTP_BODY_TIMEOUT_MS: '600000',
    OUTBOUND_ALLOW_LOOPBACK: 'true',
    MODEL_PROVIDER_BASE_URL: model.baseUrl,
    MODEL_PROVIDER_MODELS: 'test-model',
  }),
  'alice',
  'bob',
);
const delay = useHarnessWith(() => ({ LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '50' }), 'carol');

/** A note create whose body is half sent: in flight until `finish` sends the rest; resolves with its status. */
function heldCreate(h: Harness, user: TestUser): { finish(): Promise<number> } {
  const body = JSON.stringify({ title: 'Held', content: 'x'.repeat(200) });
  const req = http.request(`${h.baseUrl}/api/v1/notes`, {
    method: 'POST',
    headers: { ...user.auth, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
  });
  const answered = new Promise<number>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
  req.write(body.slice(0, 20));
  let sent = false;
  return {
    finish: () => {
      if (!sent) req.end(body.slice(20));
      sent = true;
      return answered;
    },
  };
}

/** Asks until the instance refuses (the held requests reach it in their own time): the refusal. */
async function untilRefused(h: Harness, user: TestUser) {
  for (let i = 0; i < 200; i += 1) {
    const res = await h.http().get('/api/v1/notes').set(user.auth);
    if (res.status === 503) return res;
    expect(res.status).toBe(200);
  }
  throw new Error('never refused');
}

/** Keeps the event loop busy for about `ms`, in slices that let timers fire (late). */
async function busy(ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const slice = performance.now() + 150;
    while (performance.now() < slice) {
      // spinning: the event loop cannot run meanwhile
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('in-flight limit', () => {
  test('past the limit: 503 overloaded with Retry-After, nothing done; probes answer; a freed slot serves again', async () => {
    const { h } = inFlight;
    const first = heldCreate(h, inFlight.alice);
    const second = heldCreate(h, inFlight.alice);
    try {
      const refused = await untilRefused(h, inFlight.bob);
      expect(refused.body).toEqual({ error: 'The service is at capacity; try again shortly.', code: 'overloaded' });
      expect(refused.headers['retry-after']).toBe('1');
      expect(refused.headers['x-request-id']).toEqual(expect.any(String));
      expect(refused.headers['content-type']).toMatch(/^application\/json/);
      // A refused write creates nothing; the probes and /v1's errors in OpenAI's shape.
      expect((await h.http().post('/api/v1/notes').set(inFlight.bob.auth).send({ title: 'Refused', content: '' })).status).toBe(503);
      expect((await h.http().get('/healthz')).status).toBe(200);
      expect((await h.http().get('/readyz')).status).toBe(200);
      const openai = await h.http().get('/v1/models').set(inFlight.bob.auth);
      expect(openai.status).toBe(503);
      expect(openai.body).toEqual({
        error: { message: 'The service is at capacity; try again shortly.', type: 'server_error', param: null, code: 'overloaded' },
      });
      expect(await first.finish()).toBe(200);
      // One slot free: served again.
      expect((await h.http().get('/api/v1/notes').set(inFlight.bob.auth)).status).toBe(200);
    } finally {
      await Promise.all([first.finish(), second.finish()]);
    }
    const bobs = await h.http().get('/api/v1/notes').set(inFlight.bob.auth);
    expect(bobs.body.notes).toEqual([]);
    const alices = await h.http().get('/api/v1/notes').set(inFlight.alice.auth);
    expect(alices.body.notes).toHaveLength(2);
  });

  test('an opened stream no longer counts: requests are served while it streams', async () => {
    const { h } = inFlight;
    let resume: (value: unknown) => void = () => undefined;
    scriptAnswers(model, { kind: 'pause', chunks: ['Hel'], until: new Promise((resolve) => (resume = resolve)), rest: ['lo'] });
    const client = new OpenAI({ baseURL: `${h.baseUrl}/v1`, apiKey: inFlight.alice.token, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Hi' }], stream: true });
    const chunks = stream[Symbol.asyncIterator]();
    await chunks.next(); // the role chunk: the stream is open
    const held = heldCreate(h, inFlight.alice);
    try {
      // The stream and one held request: two would be the limit if the stream still counted.
      for (let i = 0; i < 20; i += 1) expect((await h.http().get('/api/v1/notes').set(inFlight.bob.auth)).status).toBe(200);
    } finally {
      resume(null);
      await held.finish();
    }
    let text = '';
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) text += next.value.choices[0]?.delta.content ?? '';
    expect(text).toBe('Hello');
  });

  test('requests pipelined on a connection that closes before their answers are released', async () => {
    const { h } = inFlight;
    let release: (value: unknown) => void = () => undefined;
    scriptAnswers(model, { kind: 'hold', until: new Promise((resolve) => (release = resolve)), then: { kind: 'reply', chunks: ['Late'] } });
    const seen = model.requests.length;
    const body = JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'Hi' }] });
    const { port } = new URL(h.baseUrl);
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    // One packet: a completion that waits on its model, then a page behind it on the same connection.
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: ${inFlight.alice.auth.Authorization}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}` +
        `GET /api/v1/notes HTTP/1.1\r\nHost: x\r\nAuthorization: ${inFlight.alice.auth.Authorization}\r\n\r\n`,
    );
    for (let i = 0; i < 600 && model.requests.length === seen; i += 1) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(model.requests.length).toBeGreaterThan(seen);
    // Both are in flight now (the limit): a third request is refused.
    expect((await h.http().get('/api/v1/notes').set(inFlight.bob.auth)).status).toBe(503);
    socket.destroy();
    release(null);
    // Once the server has seen the connection close, both slots are free again.
    let status = 503;
    for (let i = 0; i < 600 && status === 503; i += 1) {
      status = (await h.http().get('/api/v1/notes').set(inFlight.bob.auth)).status;
      if (status === 503) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(status).toBe(200);
    const first = heldCreate(h, inFlight.alice);
    try {
      expect((await h.http().get('/api/v1/notes').set(inFlight.bob.auth)).status).toBe(200);
    } finally {
      await first.finish();
    }
  });

  test('a request that is not JSON nor authenticated is refused the same way while at the limit', async () => {
    const { h } = inFlight;
    const first = heldCreate(h, inFlight.alice);
    const second = heldCreate(h, inFlight.alice);
    try {
      await untilRefused(h, inFlight.bob);
      const anonymous = await h.http().get('/api/v1/projects');
      expect(anonymous.status).toBe(503);
      expect(anonymous.body.code).toBe('overloaded');
    } finally {
      await Promise.all([first.finish(), second.finish()]);
    }
    expect((await h.http().get('/api/v1/projects')).status).toBe(401);
  });
});

describe('event-loop delay', () => {
  test('while the event loop runs late, new requests are 503 overloaded; probes answer; it recovers', async () => {
    const { h } = delay;
    // The first request starts the reading window (nothing before it counts).
    expect((await h.http().get('/api/v1/notes').set(delay.carol.auth)).status).toBe(200);
    await busy(1200);
    const refused = await h.http().get('/api/v1/notes').set(delay.carol.auth);
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe('overloaded');
    expect(refused.headers['retry-after']).toBe('1');
    expect((await h.http().get('/healthz')).status).toBe(200);
    // Once the loop keeps time again, the next window's reading lets requests through.
    let status = 503;
    for (let i = 0; i < 600 && status === 503; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = (await h.http().get('/api/v1/notes').set(delay.carol.auth)).status;
    }
    expect(status).toBe(200);
  });
});
