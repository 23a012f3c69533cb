import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import supertest from 'supertest';
import { loadApiDocument, METHODS, pathValidators, toExpressPath } from '../../src/http/openapi';
import { RequestValidators } from '../../src/http/request-validation';
import { toApiError } from '../../src/http/error-middleware';

/**
 * The service's request validation against express-openapi-validator's, request by request: the
 * same answer (status and details) and the same typed query, so that the service answers as the
 * library did, and a library update that changes any of it fails here.
 */
const doc = loadApiDocument();
const own = new RequestValidators(doc);
let library: Map<string, RequestHandler[]>;

beforeAll(async () => {
  library = await pathValidators(doc, { validateApiSpec: false, validateResponses: false });
});

const rendered: ErrorRequestHandler = (error, _req, res, _next) => {
  const apiError = toApiError(error, 1_000_000);
  res.status(apiError?.status ?? 500).json(apiError?.body() ?? { error: String(error) });
};

type Method = (typeof METHODS)[number];

/** An app whose only route is `openApiPath`'s `method`, checked by `which` validator. */
function appFor(which: 'own' | 'library', openApiPath: string, method: Method) {
  const item = doc.paths[openApiPath] as Record<string, unknown>;
  const validation =
    which === 'own' ? [own.forOperation(item, item[method] as never)] : (library.get(openApiPath) as RequestHandler[]);
  const app = express();
  app.set('query parser', 'simple');
  app.use(express.json({ strict: false }));
  app[method](toExpressPath(openApiPath), ...validation, (req, res) => {
    res.status(299).json({ query: req.query, params: req.params, body: req.body ?? null });
  });
  app.use(rendered);
  return supertest(app);
}

interface Case {
  path: string;
  method: Method;
  url: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** The status both must answer (299: the request passed). */
  status: number;
}

const noteId = '01936d2e-7b1a-7c3e-9f00-5a2b9c4d1e20';
const cases: Case[] = [
  { path: '/api/v1/notes', method: 'get', url: '/api/v1/notes?limit=5&pinned=true', status: 299 },
  { path: '/api/v1/notes', method: 'get', url: '/api/v1/notes', status: 299 },
  { path: '/api/v1/notes', method: 'get', url: '/api/v1/notes?limit=0', status: 400 },
  { path: '/api/v1/notes', method: 'get', url: '/api/v1/notes?limit=abc&pinned=maybe', status: 400 },
  { path: '/api/v1/notes', method: 'get', url: '/api/v1/notes?limit=1&limit=2', status: 400 },
  { path: '/api/v1/notes', method: 'get', url: '/api/v1/notes?unknown=1', status: 400 },
  { path: '/api/v1/notes', method: 'get', url: '/api/v1/notes?limit=', status: 400 },
  { path: '/api/v1/notes', method: 'get', url: '/api/v1/notes?cursor=a+b', status: 400 },
  { path: '/api/v1/notes', method: 'get', url: '/api/v1/notes?cursor=a%2Bb', status: 299 },
  { path: '/api/v1/notes', method: 'post', url: '/api/v1/notes', body: { title: 'T', content: 'c' }, status: 299 },
  { path: '/api/v1/notes', method: 'post', url: '/api/v1/notes', body: { title: 7, extra: true }, status: 400 },
  { path: '/api/v1/notes', method: 'post', url: '/api/v1/notes', status: 400 },
  { path: '/api/v1/notes', method: 'post', url: '/api/v1/notes', body: 'text', headers: { 'content-type': 'text/plain' }, status: 400 },
  { path: '/api/v1/notes', method: 'post', url: '/api/v1/notes', body: '{"title":"T","content":"c"}', headers: { 'content-type': 'application/json; charset=UTF-8' }, status: 299 },
  { path: '/api/v1/notes', method: 'post', url: '/api/v1/notes', body: '{"title":"T","content":"c"}', headers: { 'content-type': 'application/vnd.api+json' }, status: 400 },
  { path: '/api/v1/notes', method: 'post', url: '/api/v1/notes', body: { title: 'T', content: 'c' }, headers: { 'idempotency-key': '' }, status: 400 },
  { path: '/api/v1/notes', method: 'delete', url: `/api/v1/notes?noteId=${noteId}`, status: 299 },
  { path: '/api/v1/notes', method: 'delete', url: '/api/v1/notes', body: { noteId }, status: 299 },
  { path: '/api/v1/projects', method: 'post', url: '/api/v1/projects', body: { name: '', color: 'red', extra: 1 }, status: 400 },
  { path: '/api/v1/projects', method: 'post', url: '/api/v1/projects', body: [], status: 400 },
  { path: '/api/v1/projects', method: 'post', url: '/api/v1/projects', body: null, headers: { 'content-type': 'application/json' }, status: 400 },
];

// An upload: any media type (or none), the bytes unread; the signed URL's token is its credential.
const upload = '/api/v1/files/{fileId}/upload';
for (const headers of [{ 'content-type': 'application/pdf' }, {}] as Array<Record<string, string>>) {
  cases.push({ path: upload, method: 'put', url: `/api/v1/files/${noteId}/upload?token=t`, headers, status: 299 });
}
cases.push(
  { path: upload, method: 'put', url: `/api/v1/files/${noteId}/upload?token=`, status: 400 },
  { path: upload, method: 'put', url: `/api/v1/files/${noteId}/upload?token=t&other=1`, status: 400 },
  { path: upload, method: 'put', url: `/api/v1/files/${'x'.repeat(201)}/upload?token=t`, status: 400 },
);

// A oneOf with a discriminator (the mode) in a body.
const roots = '/api/v1/agent-environments/{environmentId}/roots';
for (const [filesystemGrant, status] of [
  [{ mode: 'selected_roots', roots: [] }, 400],
  [{ mode: 'nope' }, 400],
  ['all', 400],
  [{ mode: 'all_user_files' }, 299],
  [{ mode: 'selected_roots', roots: ['/work'] }, 299],
] as const) {
  cases.push({ path: roots, method: 'patch', url: roots.replace('{environmentId}', noteId), body: { filesystemGrant }, status });
}

describe('the service’s request validation answers as express-openapi-validator', () => {
  test.each(cases.map((c) => [`${c.method.toUpperCase()} ${c.url} ${JSON.stringify(c.body ?? null)}`, c] as const))('%s', async (_name, c) => {
    const send = async (which: 'own' | 'library') => {
      let request = appFor(which, c.path, c.method)[c.method](c.url);
      for (const [name, value] of Object.entries(c.headers ?? {})) request = request.set(name, value);
      if (c.body !== undefined) request = request.send(c.body as object);
      const res = await request;
      return { status: res.status, body: res.body as unknown };
    };
    const [ours, theirs] = [await send('own'), await send('library')];
    expect(ours).toEqual(theirs);
    expect(ours.status).toBe(c.status);
  });
});

describe('where the service’s request validation is stricter than the library’s', () => {
  /** What the operation's validator throws for a request without a body (what Express gives when none was sent). */
  function withoutBody(openApiPath: string, method: Method): unknown {
    const item = doc.paths[openApiPath] as Record<string, unknown>;
    const req = { method: method.toUpperCase(), headers: { 'content-type': 'application/json' }, query: {}, params: {}, originalUrl: openApiPath, body: undefined };
    try {
      own.forOperation(item, item[method] as never)(req as never, {} as never, () => undefined);
      return undefined;
    } catch (error) {
      return error;
    }
  }

  test('a body the document requires may not be left out, even where its schema requires no property', () => {
    // The library refuses only bodies whose schema lists required properties (files, not notes).
    for (const [openApiPath, method] of [['/api/v1/notes', 'post'], ['/api/v1/files', 'post']] as const) {
      expect(withoutBody(openApiPath, method)).toMatchObject({
        status: 400,
        extras: { details: [{ path: '/body', message: "must have required property 'body'" }] },
      });
    }
    expect(withoutBody('/api/v1/notes', 'delete')).toBeUndefined();
  });

  test('a `#` ends the query string', () => {
    const item = doc.paths['/api/v1/notes'] as Record<string, unknown>;
    const req = { method: 'GET', headers: {}, query: { cursor: 'a' }, params: {}, originalUrl: '/api/v1/notes?cursor=a#b:c' };
    expect(() => own.forOperation(item, item.get as never)(req as never, {} as never, () => undefined)).not.toThrow();
  });
});
