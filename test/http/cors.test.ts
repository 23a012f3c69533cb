import type { Response } from 'supertest';
import { storeFile } from '../helpers/files';
import { useHarnessWith } from '../helpers/harness';

const APP = 'https://app.example.com';
const OTHER = 'https://evil.example.net';

const ctx = useHarnessWith(
  () => ({ ALLOWED_ORIGINS: `${APP},http://localhost:5173`, RATE_LIMIT_PER_MINUTE: '5' }),
  'alice',
  'bob',
  'carol',
  'dave',
);

const corsHeaders = (res: Response) => Object.keys(res.headers).filter((name) => name.startsWith('access-control-'));
const varies = (res: Response) => (res.headers.vary ?? '').split(/\s*,\s*/).includes('Origin');
const exposed = (res: Response) => (res.headers['access-control-expose-headers'] ?? '').split(/\s*,\s*/);

/** What every answer to the allowed origin carries. */
function expectAllowed(res: Response): void {
  expect(res.headers['access-control-allow-origin']).toBe(APP);
  expect(res.headers['access-control-allow-credentials']).toBe('true');
  expect(exposed(res)).toEqual(
    expect.arrayContaining([
      'X-Request-Id',
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'Retry-After',
      'ETag',
      'Content-Range',
      'Content-Disposition',
      'Idempotent-Replayed',
      'WWW-Authenticate',
    ]),
  );
  expect(varies(res)).toBe(true);
}

describe('CORS for the origins in ALLOWED_ORIGINS', () => {
  test('a preflight from an allowed origin is 204 with the methods, headers and max age', async () => {
    for (const path of ['/api/v1/notes', '/api/v1/files/abc/content', '/auth/session', '/openapi.json', '/api/v1/no-such-route']) {
      const res = await ctx.h
        .http()
        .options(path)
        .set('Origin', APP)
        .set('Access-Control-Request-Method', 'POST')
        .set('Access-Control-Request-Headers', 'authorization,content-type,idempotency-key');
      expect({ path, status: res.status }).toEqual({ path, status: 204 });
      expect(res.headers['access-control-allow-origin']).toBe(APP);
      expect(res.headers['access-control-allow-credentials']).toBe('true');
      expect(String(res.headers['access-control-allow-methods']).split(', ')).toEqual(
        expect.arrayContaining(['GET', 'POST', 'PATCH', 'DELETE']),
      );
      expect(String(res.headers['access-control-allow-headers']).split(', ')).toEqual(
        expect.arrayContaining([
          'Authorization',
          'Content-Type',
          'Idempotency-Key',
          'If-None-Match',
          'If-Range',
          'Range',
          'Environment-Credential',
        ]),
      );
      expect(res.headers['access-control-max-age']).toBe('600');
      expect(varies(res)).toBe(true);
      expect(res.text).toBe('');
    }
    // The second allowed origin is answered with itself, never with a wildcard.
    const second = await ctx.h
      .http()
      .options('/api/v1/notes')
      .set('Origin', 'http://localhost:5173')
      .set('Access-Control-Request-Method', 'GET');
    expect(second.status).toBe(204);
    expect(second.headers['access-control-allow-origin']).toBe('http://localhost:5173');
  });

  test('a preflight from another origin is 403 forbidden without any CORS header', async () => {
    for (const origin of [OTHER, 'null', 'https://app.example.com.evil.net', 'http://app.example.com']) {
      const res = await ctx.h.http().options('/api/v1/notes').set('Origin', origin).set('Access-Control-Request-Method', 'GET');
      expect({ origin, status: res.status }).toEqual({ origin, status: 403 });
      expect(res.body).toMatchObject({ code: 'forbidden', error: expect.any(String) });
      expect(corsHeaders(res)).toEqual([]);
      expect(varies(res)).toBe(true);
      // The allowed origins are not revealed.
      expect(JSON.stringify(res.body)).not.toContain('example.com');
    }
  });

  test('answers to an allowed origin carry the origin, credentials and exposed headers, errors included', async () => {
    const { alice, bob } = ctx;
    const ok = await ctx.h.http().get('/api/v1/notes').set(alice.auth).set('Origin', APP);
    expect(ok.status).toBe(200);
    expectAllowed(ok);
    expect(ok.headers['x-request-id']).toEqual(expect.any(String));

    const unauthenticated = await ctx.h.http().get('/api/v1/notes').set('Origin', APP);
    expect(unauthenticated.status).toBe(401);
    expectAllowed(unauthenticated);

    const invalid = await ctx.h.http().get('/api/v1/notes?limit=5000').set(alice.auth).set('Origin', APP);
    expect(invalid.status).toBe(400);
    expectAllowed(invalid);

    const missing = await ctx.h.http().get('/api/v1/no-such-route').set(alice.auth).set('Origin', APP);
    expect(missing.status).toBe(404);
    expectAllowed(missing);

    const document = await ctx.h.http().get('/openapi.json').set('Origin', APP);
    expect(document.status).toBe(200);
    expectAllowed(document);

    const content = Buffer.from('cross-origin bytes');
    const file = await storeFile(ctx.h, bob, 'cors.txt', 'text/plain', content);
    const cached = await ctx.h
      .http()
      .get(`/api/v1/files/${file.fileId}/content`)
      .set(bob.auth)
      .set('Origin', APP)
      .set('If-None-Match', `"${file.sha256}"`);
    expect(cached.status).toBe(304);
    expectAllowed(cached);
  });

  test('a 429 to an allowed origin is readable: Retry-After and RateLimit-* are exposed', async () => {
    const { carol } = ctx;
    let last: Response | undefined;
    for (let i = 0; i < 6; i += 1) last = await ctx.h.http().get('/api/v1/projects').set(carol.auth).set('Origin', APP);
    expect(last!.status).toBe(429);
    expectAllowed(last!);
    expect(last!.headers['retry-after']).toEqual(expect.any(String));
    expect(last!.headers['ratelimit-remaining']).toBe('0');
  });

  test('answers to another origin, or without Origin, carry no CORS header', async () => {
    const { alice } = ctx;
    for (const origin of [OTHER, undefined]) {
      const req = ctx.h.http().get('/api/v1/notes').set(alice.auth);
      const res = await (origin ? req.set('Origin', origin) : req);
      expect(res.status).toBe(200);
      expect(corsHeaders(res)).toEqual([]);
      expect(varies(res)).toBe(true);
    }
    const unauthenticated = await ctx.h.http().get('/api/v1/notes').set('Origin', OTHER);
    expect(unauthenticated.status).toBe(401);
    expect(corsHeaders(unauthenticated)).toEqual([]);
  });

  test('the session cookie works from an allowed origin; another origin gets neither CORS nor the write', async () => {
    const { dave } = ctx;
    const session = await ctx.h.http().post('/auth/session').set(dave.auth).set('Origin', APP);
    expect(session.status).toBe(200);
    expectAllowed(session);
    const cookie = ([] as string[])
      .concat(session.headers['set-cookie'] ?? [])
      .map((line) => line.split(';')[0])
      .join('; ');
    expect(cookie).toMatch(/^service_session=/);

    const created = await ctx.h
      .http()
      .post('/api/v1/notes')
      .set('Cookie', cookie)
      .set('Origin', APP)
      .send({ title: 'From the app', content: '' });
    expect(created.status).toBe(200);
    expectAllowed(created);

    const refused = await ctx.h
      .http()
      .post('/api/v1/notes')
      .set('Cookie', cookie)
      .set('Origin', OTHER)
      .send({ title: 'From elsewhere', content: '' });
    expect(refused.status).toBe(403);
    expect(corsHeaders(refused)).toEqual([]);
    const notes = await ctx.h.http().get('/api/v1/notes').set(dave.auth);
    expect(notes.body.notes.map((note: { title: string }) => note.title)).toEqual(['From the app']);
  });

  test('health, readiness, metrics and the reference page get no CORS', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/docs']) {
      const res = await ctx.h.http().get(path).set('Origin', APP);
      expect({ path, cors: corsHeaders(res) }).toEqual({ path, cors: [] });
      const preflight = await ctx.h.http().options(path).set('Origin', APP).set('Access-Control-Request-Method', 'GET');
      expect({ path, cors: corsHeaders(preflight) }).toEqual({ path, cors: [] });
    }
  });
});
