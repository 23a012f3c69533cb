import net from 'node:net';
import { generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { DEV_AUDIENCE, DEV_ISSUER } from '../../src/platform/tokens';
import { type Harness, startHarness, useHarnessWith } from '../helpers/harness';

/**
 * The HTTP edge against slow, anonymous and malformed clients (issue 27, points 6 and 9). The
 * harness trusts X-Forwarded-For, so each test counts its failed authentications under an
 * address of its own.
 */
const ctx = useHarnessWith(
  () => ({
    TRUST_PROXY: 'true',
    AUTH_FAILURES_PER_MINUTE: '3',
    HTTP_HEADERS_TIMEOUT_MS: '5000',
    HTTP_BODY_TIMEOUT_MS: '5000',
    HTTP_BODY_MIN_BYTES_PER_SECOND: '1000',
  }),
  'alice',
);

/** Generous: the only bound of the waits below, far above every configured timeout. */
const BOUND_MS = 40_000;

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
  /** Whether the server closed the connection (within BOUND_MS). */
  closed: boolean;
}

/**
 * Writes `head` (and then, if given, `trickle` one byte each 200 ms until the connection closes)
 * on a raw connection and reads what comes back until the server closes it, or BOUND_MS passes.
 */
function exchange(head: string | Buffer, trickle = false): Promise<RawAnswer> {
  const { port } = new URL(ctx.h.baseUrl);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    const chunks: Buffer[] = [];
    let dripping: NodeJS.Timeout | undefined;
    const done = (closed: boolean) => {
      clearTimeout(bound);
      clearInterval(dripping);
      socket.destroy();
      const raw = Buffer.concat(chunks).toString('utf8');
      const [top = '', ...rest] = raw.split('\r\n\r\n');
      const [statusLine = '', ...lines] = top.split('\r\n');
      const headers = Object.fromEntries(
        lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      let body: unknown = rest.join('\r\n\r\n');
      try {
        body = JSON.parse(body as string);
      } catch {
        // not JSON: kept as text for the assertion to show
      }
      resolve({ status: Number(statusLine.split(' ')[1] ?? 0), headers, body, closed });
    };
    const bound = setTimeout(() => done(false), BOUND_MS);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('close', () => done(true));
    socket.on('error', () => undefined);
    socket.on('connect', () => {
      if (head.length > 0) socket.write(head);
      if (trickle) dripping = setInterval(() => socket.writable && socket.write(' '), 200);
    });
  });
}

const sign = (key: CryptoKey, claims: { sub?: string; exp?: number; aud?: string }) => {
  const jwt = new SignJWT({})
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuer(DEV_ISSUER)
    .setAudience(claims.aud ?? DEV_AUDIENCE)
    .setIssuedAt();
  if (claims.sub !== undefined) jwt.setSubject(claims.sub);
  return jwt.setExpirationTime(claims.exp ?? '1h').sign(key);
};

const challenge = 'Bearer realm="ai-workspace-service"';

describe('slow and anonymous clients', () => {
  test('a refused request is answered without its body being read, and its connection closed', async () => {
    const head =
      'POST /api/v1/projects HTTP/1.1\r\nHost: svc\r\nAuthorization: Bearer not.a.jwt\r\nX-Forwarded-For: 198.51.100.1\r\n' +
      'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"name":';
    const answer = await exchange(head);
    expect(answer).toMatchObject({ status: 401, closed: true, body: { code: 'unauthenticated' } });
    expect(answer.headers.connection).toBe('close');
  });

  test('a body that trickles in is cut with 408 request_timeout', async () => {
    const head =
      `POST /api/v1/projects HTTP/1.1\r\nHost: svc\r\nAuthorization: ${ctx.alice.auth.Authorization}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"name":"slow"';
    const answer = await exchange(head, true);
    expect(answer).toMatchObject({ status: 408, closed: true, body: { code: 'request_timeout' } });
    expect(answer.headers.connection).toBe('close');
  });

  test('a connection that sends nothing is closed after the headers timeout, with 408 in the error shape', async () => {
    const answer = await exchange('');
    expect(answer).toMatchObject({ status: 408, closed: true, body: { code: 'request_timeout', error: expect.any(String) } });
  });

  test('failed authentications over the limit per address are 429 rate_limited; success and other addresses are not affected', async () => {
    const from = (address: string) => ({ 'X-Forwarded-For': address, Authorization: 'Bearer not.a.jwt' });
    for (let i = 0; i < 3; i += 1) expect((await ctx.h.http().get('/api/v1/notes').set(from('198.51.100.2'))).status).toBe(401);
    const limited = await ctx.h.http().get('/api/v1/notes').set(from('198.51.100.2'));
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ code: 'rate_limited', retryAfter: expect.any(Number) });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);

    const good = await ctx.h
      .http()
      .get('/api/v1/notes')
      .set({ ...ctx.alice.auth, 'X-Forwarded-For': '198.51.100.2' });
    expect(good.status).toBe(200);
    expect((await ctx.h.http().get('/api/v1/notes').set(from('198.51.100.3'))).status).toBe(401);
    // No credentials at all costs nothing to refuse and is not counted.
    for (let i = 0; i < 4; i += 1)
      expect((await ctx.h.http().get('/api/v1/notes').set('X-Forwarded-For', '198.51.100.4')).status).toBe(401);
  });
});

describe('the error surface', () => {
  test('no credentials: 401 saying how to authenticate, with a bare Bearer challenge', async () => {
    const res = await ctx.h.http().get('/api/v1/notes').set('X-Forwarded-For', '198.51.100.10');
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('unauthenticated');
    expect(res.body.error).toMatch(/Authorization: Bearer/);
    expect(res.body.error).toMatch(/session cookie/);
    expect(res.headers['www-authenticate']).toBe(challenge);
  });

  test('expired and forged tokens are told apart (RFC 6750 invalid_token) and the body says the same', async () => {
    const devKey = ctx.h.runtime.devAuth!.privateKey;
    const forger = await generateKeyPair('ES256');
    const cases: Array<[string, string, string]> = [
      [await sign(devKey, { sub: 'alice', exp: Math.floor(Date.now() / 1000) - 600 }), 'The access token expired.', '198.51.100.11'],
      [await sign(forger.privateKey, { sub: 'alice' }), "The access token's signature is not valid.", '198.51.100.12'],
      ['not.a.jwt', 'The access token is malformed.', '198.51.100.13'],
      [
        await sign(devKey, { sub: 'alice', aud: 'another-api' }),
        'The access token is not meant for this service (audience).',
        '198.51.100.14',
      ],
      [await sign(devKey, {}), 'The access token has no sub claim.', '198.51.100.15'],
    ];
    for (const [token, description, address] of cases) {
      const res = await ctx.h
        .http()
        .get('/api/v1/notes')
        .set({ Authorization: `Bearer ${token}`, 'X-Forwarded-For': address });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ code: 'unauthenticated', error: description });
      expect(res.headers['www-authenticate']).toBe(`${challenge}, error="invalid_token", error_description="${description}"`);
    }
  });

  test('a token whose subject holds NUL, a lone surrogate or too many characters is invalid_token', async () => {
    const devKey = ctx.h.runtime.devAuth!.privateKey;
    const subjects = ['al\u0000ice', 'al\ud800ice', 'x'.repeat(201)];
    for (const [i, sub] of subjects.entries()) {
      const res = await ctx.h
        .http()
        .get('/api/v1/notes')
        .set({ Authorization: `Bearer ${await sign(devKey, { sub })}`, 'X-Forwarded-For': `198.51.100.2${i}` });
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('unauthenticated');
      expect(res.headers['www-authenticate']).toMatch(
        /error="invalid_token", error_description="The access token's subject is not a usable user id/,
      );
    }
  });

  test('a path outside /api/v1 that the service does not serve is a JSON 404; its own routes still answer', async () => {
    const res = await ctx.h.http().get('/no-such-page');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ error: expect.any(String), code: 'not_found' });
    // A request without a body keeps its connection.
    expect((await fetch(`${ctx.h.baseUrl}/no-such-page`)).headers.get('connection')).toBe('keep-alive');
    for (const path of ['/healthz', '/readyz', '/openapi.json', '/openapi.yaml', '/docs'])
      expect((await ctx.h.http().get(path)).status).toBe(200);
    expect((await ctx.h.http().post('/auth/session').set(ctx.alice.auth)).status).toBe(200);
  });

  test('a header with a control character is a JSON 400 invalid_request, headers over the size limit a 431', async () => {
    const bad = await exchange(
      `GET /api/v1/notes HTTP/1.1\r\nHost: svc\r\nIdempotency-Key: a\u0001b\r\n${ctx.alice.auth.Authorization.replace(/^/, 'Authorization: ')}\r\n\r\n`,
    );
    expect(bad).toMatchObject({ status: 400, closed: true, body: { code: 'invalid_request', error: expect.any(String) } });
    expect(bad.headers.connection).toBe('close');
    expect(bad.headers['content-type']).toMatch(/^application\/json/);

    const large = await exchange(`GET /api/v1/notes HTTP/1.1\r\nHost: svc\r\nX-Padding: ${'p'.repeat(20_000)}\r\n\r\n`);
    expect(large).toMatchObject({ status: 431, closed: true, body: { code: 'request_header_fields_too_large' } });
  });
});

describe('idle keep-alive connections and the connection cap, over real sockets', () => {
  // A service of its own: a short keep-alive timeout, a cap of two connections, and a headers
  // timeout beyond the test's own timeout, so that nothing but the keep-alive timeout can close an
  // idle connection within the test.
  let own: Harness;
  beforeAll(async () => {
    own = await startHarness({ HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000', HTTP_HEADERS_TIMEOUT_MS: '600000', HTTP_MAX_CONNECTIONS: '2' });
  });
  afterAll(() => own?.close());

  interface Connection {
    socket: net.Socket;
    /** Sends a keep-alive GET of `path` and resolves with the status of its answer. */
    get(path: string): Promise<number>;
    /** Every byte received so far. */
    received(): string;
    /** Resolves when the server (or the client) has closed the connection. */
    closed: Promise<void>;
  }

  /** A raw connection, resolved once connected (the server may still drop it at once). */
  async function connect(): Promise<Connection> {
    const { port } = new URL(own.baseUrl);
    const socket = net.connect(Number(port), '127.0.0.1');
    let data = '';
    let waiting: { from: number; resolve: (status: number) => void } | undefined;
    socket.on('data', (chunk: Buffer) => {
      data += chunk.toString('latin1');
      if (!waiting) return;
      // One answer with a Content-Length body (what /healthz sends): complete once the body is in.
      const answer = data.slice(waiting.from);
      const end = answer.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(answer.slice(0, end));
      if (end >= 0 && length && answer.length >= end + 4 + Number(length[1])) {
        const { resolve } = waiting;
        waiting = undefined;
        resolve(Number(answer.split(' ')[1]));
      }
    });
    socket.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    return {
      socket,
      received: () => data,
      closed,
      get: (path) =>
        new Promise<number>((resolve, reject) => {
          waiting = { from: data.length, resolve };
          socket.once('close', () => reject(new Error(`closed before an answer to ${path}; received: ${data.slice(0, 200)}`)));
          socket.write(`GET ${path} HTTP/1.1\r\nHost: svc\r\n\r\n`);
        }),
    };
  }

  test('an idle keep-alive connection is closed after the keep-alive timeout, without a word', async () => {
    const connection = await connect();
    expect(await connection.get('/healthz')).toBe(200);
    expect(connection.received()).toMatch(/\r\nConnection: keep-alive\r\n/i);
    // The configured timeout is the one announced (Node's default would say 5).
    expect(connection.received()).toMatch(/\r\nKeep-Alive: timeout=1\r\n/i);
    const answered = connection.received().length;
    // Only the keep-alive timeout (1 s) can close it before the test's timeout: the headers
    // timeout is ten minutes, and the client never closes it.
    await connection.closed;
    expect(connection.received().length).toBe(answered);
  });

  test('connections over HTTP_MAX_CONNECTIONS are dropped at once; the open ones keep being served', async () => {
    const first = await connect();
    const second = await connect();
    expect(await first.get('/healthz')).toBe(200);
    expect(await second.get('/healthz')).toBe(200);

    const third = await connect();
    // Dropped by the server, unanswered (without the cap it would be served: 200).
    expect(await third.get('/healthz').catch(() => 'dropped')).toBe('dropped');
    await third.closed;
    expect(third.received()).toBe('');

    // Served again on both (each request renews its keep-alive time).
    expect(await first.get('/readyz')).toBe(200);
    expect(await second.get('/healthz')).toBe(200);
    first.socket.destroy();
    second.socket.destroy();
  });
});
