import { parse } from 'yaml';
import supertest from 'supertest';
import { anotherInstance, type Harness, startHarness, type TestUser, textBody } from '../helpers/harness';

let h: Harness;
let alice: TestUser;

beforeAll(async () => {
  h = await startHarness({ BODY_LIMIT: '64kb' });
  alice = await h.newUser('alice');
});
afterAll(() => h.close());

describe('HTTP basics', () => {
  test('health and readiness', async () => {
    expect((await h.http().get('/healthz')).body).toEqual({ status: 'ok' });
    const ready = await h.http().get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: 'ready', checks: { database: true } });
  });

  test('security headers, no x-powered-by, a request id', async () => {
    const res = await h.http().get('/api/v1/notes').set(alice.auth).set('X-Request-Id', 'client-id-1');
    expect(res.headers['x-powered-by']).toBeUndefined();
    expect(res.headers).toMatchObject({
      'content-security-policy': "default-src 'none';frame-ancestors 'none'",
      'cross-origin-resource-policy': 'same-origin',
      'referrer-policy': 'no-referrer',
      'strict-transport-security': 'max-age=31536000; includeSubDomains',
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
    });
    // Headers only documents, retired browsers or plug-ins read are not sent with the API's answers.
    for (const name of [
      'cross-origin-opener-policy',
      'origin-agent-cluster',
      'x-dns-prefetch-control',
      'x-download-options',
      'x-permitted-cross-domain-policies',
      'x-xss-protection',
    ]) {
      expect(res.headers[name]).toBeUndefined();
    }
    expect(res.headers['x-request-id']).toBe('client-id-1');
    const generated = await h.http().get('/healthz').set('X-Request-Id', 'bad id with spaces');
    expect(generated.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('an unknown /api/v1 route is a 404 in the error shape', async () => {
    const res = await h.http().get('/api/v1/nothing-here').set(alice.auth);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: expect.any(String), code: 'not_found' });
  });

  test('a method the route does not have is a 405 with Allow', async () => {
    const res = await h.http().put('/api/v1/notes').set(alice.auth).send({});
    expect(res.status).toBe(405);
    expect(res.body.code).toBe('method_not_allowed');
    expect(res.headers.allow).toContain('PATCH');
  });

  test('HEAD answers like GET, without a body', async () => {
    const head = await h.http().head('/api/v1/notes').set(alice.auth);
    expect(head.status).toBe(200);
    expect(head.headers['content-type']).toMatch(/application\/json/);
    expect(head.text ?? '').toBe('');
    const get = await h.http().get('/api/v1/notes').set(alice.auth);
    expect(Number(get.headers['content-length'])).toBe(Buffer.byteLength(get.text));
    expect(head.headers['content-length']).toBe(get.headers['content-length']);
    expect(get.headers['transfer-encoding']).toBeUndefined();
    expect((await h.http().head('/api/v1/notes')).status).toBe(401);
  });

  test('without response validation (production), JSON answers are what res.json writes', async () => {
    const unvalidated = await anotherInstance(h, { VALIDATE_RESPONSES: 'false' });
    try {
      const direct = supertest(unvalidated.app);
      const project = await direct.post('/api/v1/projects').set(alice.auth).send({ name: 'Written directly ✓ "quoted"' });
      expect(project.status).toBe(200);
      expect(project.body.project).toMatchObject({ name: 'Written directly ✓ "quoted"' });
      for (const route of ['/api/v1/capabilities', '/api/v1/projects', `/api/v1/projects?projectId=${project.body.project.projectId}`]) {
        const [validated, written] = await Promise.all([h.http().get(route).set(alice.auth), direct.get(route).set(alice.auth)]);
        expect(written.status).toBe(200);
        expect(written.headers['content-type']).toBe('application/json; charset=utf-8');
        expect(Number(written.headers['content-length'])).toBe(Buffer.byteLength(written.text));
        expect(written.text).toBe(JSON.stringify(validated.body));
        const head = await direct.head(route).set(alice.auth);
        expect(head.status).toBe(200);
        expect(head.headers['content-length']).toBe(written.headers['content-length']);
        expect(head.text ?? '').toBe('');
      }
    } finally {
      await unvalidated.close();
    }
  });

  test('an oversized body is a 413 and creates nothing', async () => {
    const res = await h
      .http()
      .post('/api/v1/notes')
      .set(alice.auth)
      .send({ content: 'x'.repeat(70 * 1024) });
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('payload_too_large');
    const list = await h.http().get('/api/v1/notes').set(alice.auth);
    expect(list.body.notes).toHaveLength(0);
  });

  test('a body that is not JSON is a 400', async () => {
    const form = await h.http().post('/api/v1/notes').set(alice.auth).type('form').send('title=x');
    expect(form.status).toBe(400);
    expect(form.body.code).toBe('invalid_request');
    const array = await h
      .http()
      .post('/api/v1/notes')
      .set(alice.auth)
      .send([{ title: 'x' }]);
    expect(array.status).toBe(400);
  });

  test('a body the document requires may not be left out', async () => {
    // The notes' create has no required property: the document's `required: true` asks for a body.
    const none = await h.http().post('/api/v1/notes').set(alice.auth);
    expect(none.status).toBe(400);
    expect(none.body).toMatchObject({ code: 'invalid_request', details: [{ path: '/headers/content-type', message: expect.any(String) }] });
    expect((await h.http().get('/api/v1/notes').set(alice.auth)).body.notes).toEqual([]);
  });

  test('validation errors list every problem with its path', async () => {
    const res = await h.http().post('/api/v1/projects').set(alice.auth).send({ name: '', color: 'red', extra: 1 });
    expect(res.status).toBe(400);
    const paths = res.body.details.map((d: { path: string }) => d.path);
    expect(paths).toEqual(expect.arrayContaining(['/body/name', '/body/color', '/body/extra']));
  });

  test('a query value with an unencoded reserved character is a 400 naming it; encoded it is read', async () => {
    for (const query of ['cursor=a:b', 'limit=5&cursor=a,b', 'cursor=a/b&limit=5']) {
      const res = await h.http().get(`/api/v1/notes?${query}`).set(alice.auth);
      expect(res.status).toBe(400);
      expect(res.body.details).toEqual([{ path: '/query/cursor', message: expect.stringMatching(/must be url encoded/) }]);
    }
    // An integer's value is refused as not an integer (the validator checks a string's characters only).
    const limit = await h.http().get('/api/v1/notes?limit=5?').set(alice.auth);
    expect(limit.status).toBe(400);
    expect(limit.body.details).toEqual([{ path: '/query/limit', message: 'must be integer' }]);
    // Encoded, the value reaches the list, which cannot read it as a cursor.
    const encoded = await h.http().get('/api/v1/notes?limit=5&cursor=a%3Ab').set(alice.auth);
    expect(encoded.status).toBe(400);
    expect(encoded.body.details).toEqual([{ path: '/query/cursor', message: 'must be a nextCursor returned by this operation' }]);
    expect((await h.http().get('/api/v1/notes?limit=5&pinned=true').set(alice.auth)).status).toBe(200);
  });

  test('a query written by URLSearchParams is read: `+` is a space and `*` itself', async () => {
    const note = await h.http().post('/api/v1/notes').set(alice.auth).send({ title: 'Plus' });
    const noteId = note.body.note.noteId as string;
    const query = new URLSearchParams({ noteId: `${noteId} *` }).toString();
    expect(query).toBe(`noteId=${noteId}+*`);
    // Read as the id with a space and an asterisk: no such note, as when encoded with %20 and %2A.
    for (const written of [query, `noteId=${noteId}%20%2A`]) {
      const res = await h.http().get(`/api/v1/notes?${written}`).set(alice.auth);
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    // A literal plus is %2B; the other reserved characters still must be encoded.
    expect((await h.http().get(`/api/v1/notes?noteId=${noteId}`).set(alice.auth)).body.note.noteId).toBe(noteId);
    const cursor = await h.http().get('/api/v1/notes?cursor=a+b').set(alice.auth);
    expect(cursor.body.details).toEqual([{ path: '/query/cursor', message: 'must be a nextCursor returned by this operation' }]);
    const reserved = await h.http().get('/api/v1/notes?cursor=a+b:c').set(alice.auth);
    expect(reserved.body.details).toEqual([{ path: '/query/cursor', message: expect.stringMatching(/must be url encoded/) }]);
  });
});

describe('the published document', () => {
  test('/openapi.json and /openapi.yaml are the same document, version 1.0.0', async () => {
    const json = await h.http().get('/openapi.json');
    const yaml = await h.http().get('/openapi.yaml').buffer(true).parse(textBody);
    expect(json.headers['content-type']).toMatch(/application\/json/);
    expect(yaml.headers['content-type']).toMatch(/yaml/);
    expect(parse(yaml.body as string)).toEqual(json.body);
    expect(json.body.info.version).toBe('1.0.0');
  });

  test('/docs renders from local assets only', async () => {
    const page = await h.http().get('/docs');
    expect(page.status).toBe(200);
    expect(page.text).toContain('/docs/assets/swagger-ui-bundle.js');
    expect(page.text).not.toMatch(/https?:\/\//);
    for (const asset of ['/docs/assets/swagger-ui-bundle.js', '/docs/assets/swagger-ui.css', '/docs/init.js']) {
      const res = await h.http().get(asset);
      expect(res.status).toBe(200);
    }
    expect((await h.http().get('/docs/init.js')).text).toContain("url: '/openapi.json'");
    // The page carries a document's headers: its own scripts and styles may load, it may be framed by its own origin.
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['x-frame-options']).toBe('SAMEORIGIN');
    expect(page.headers['cross-origin-opener-policy']).toBe('same-origin');
  });
});
