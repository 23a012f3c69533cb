import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import supertest from 'supertest';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { loadApiDocument, METHODS, pathValidators, toExpressPath, validatorGroups, validatorOf } from '../../src/http/openapi';

/**
 * What the service relies on from express-openapi-validator, used as src/http/openapi.ts uses it
 * (its public middleware, one validator per group of paths, on Express routes), so that a
 * library update that changes any of it fails here rather than changing the service's answers.
 */
const doc = loadApiDocument();
const settings = { validateApiSpec: false, validateResponses: true };
let validators: Map<string, RequestHandler[]>;

beforeAll(async () => {
  validators = await pathValidators(doc, settings);
});

/** The library's error as the service's error middleware reads it. */
const libraryError: ErrorRequestHandler = (error, _req, res, _next) => {
  const e = error as {
    status?: number;
    message?: string;
    errors?: Array<{ path?: string; message?: string }>;
    headers?: Record<string, string>;
  };
  res.status(e.status ?? 500).json({ status: e.status, message: e.message, errors: e.errors, allow: e.headers?.Allow });
};

/**
 * An app with one route for `openApiPath` in a router mounted at `/api` (the validator matches the
 * request's full path, not the router's part of it): `method` runs the path's validator and then
 * `handler`; any other method only the validator.
 */
function appFor(openApiPath: string, method: (typeof METHODS)[number], handler: RequestHandler) {
  const validator = validators.get(openApiPath) as RequestHandler[];
  const router = express.Router();
  const route = router.route(toExpressPath(openApiPath).replace(/^\/api/, ''));
  route[method](...validator, handler);
  route.all(...validator);
  const app = express();
  app.set('query parser', 'simple');
  app.use(express.json());
  app.use('/api', router);
  app.use(libraryError);
  return supertest(app);
}

const seen: RequestHandler = (req, res) => {
  res.locals.seen = { operationId: req.openapi?.schema.operationId, params: req.params, query: req.query };
  res.status(299).send(JSON.stringify(res.locals.seen));
};

describe('express-openapi-validator, as the service uses it', () => {
  test('matches the full path inside a mounted router, names the operation and types the query', async () => {
    const res = await appFor('/api/v1/notes', 'get', seen).get('/api/v1/notes?limit=5&pinned=true');
    expect(res.status).toBe(299);
    expect(JSON.parse(res.text)).toEqual({ operationId: 'getNotes', params: {}, query: { limit: 5, pinned: true, scope: 'all' } });
  });

  test('gives the path parameters', async () => {
    const fileId = '0b0e5f38-6c4f-4d3e-9a55-2a4f1a7c9d10';
    const res = await appFor('/api/v1/files/{fileId}/content', 'get', seen).get(`/api/v1/files/${fileId}/content`);
    expect(JSON.parse(res.text)).toMatchObject({ operationId: 'getFileContent', params: { fileId } });
  });

  test('refuses a bad request with 400 and every error with its path (the service’s `details`)', async () => {
    const app = appFor('/api/v1/projects', 'post', seen);
    const body = await app.post('/api/v1/projects').send({ name: '', color: 'red', extra: 1 });
    expect(body.status).toBe(400);
    expect(body.body.errors.map((e: { path: string }) => e.path)).toEqual(
      expect.arrayContaining(['/body/name', '/body/color', '/body/extra']),
    );
    const notes = appFor('/api/v1/notes', 'get', seen);
    const limit = await notes.get('/api/v1/notes?limit=0');
    expect(limit.status).toBe(400);
    expect(limit.body.errors).toEqual([expect.objectContaining({ path: '/query/limit', message: expect.any(String) })]);
    const unknown = await notes.get('/api/v1/notes?unknown=1');
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors).toEqual([expect.objectContaining({ path: '/query/unknown' })]);
  });

  test('answers 405 with Allow for a method the path does not have', async () => {
    const res = await appFor('/api/v1/notes', 'get', seen).put('/api/v1/notes').send({});
    expect(res.status).toBe(405);
    expect(res.body.allow.split(', ').sort()).toEqual(['DELETE', 'GET', 'PATCH', 'POST']);
  });

  test('checks answers given to res.json against the operation’s responses', async () => {
    const app = appFor('/api/v1/capabilities', 'get', (_req, res) => {
      res.json({ not: 'the document’s answer' });
    });
    const res = await app.get('/api/v1/capabilities');
    expect(res.status).toBe(500);
    expect(res.body.message).toMatch(/response/);
  });
});

describe('the service’s validators', () => {
  test('each path has one, its area’s, in groups of at most 8 paths', () => {
    const paths = Object.keys(doc.paths);
    const groups = validatorGroups(paths);
    expect(groups.flat().sort()).toEqual([...paths].sort());
    for (const group of groups) expect(group.length).toBeLessThanOrEqual(8);
    const groupOf = (p: string) => groups.findIndex((group) => group.includes(p));
    expect(new Set(paths.filter((p) => p.startsWith('/api/v1/files')).map(groupOf)).size).toBe(1);
    expect(new Set(validators.values()).size).toBe(groups.length);
  });

  test('are given a document the library checks and accepts, and a start-up fails on one it refuses', async () => {
    const paths = ['/api/v1/notes', '/api/v1/files/{fileId}/content'];
    await expect(validatorOf(doc, paths, { validateApiSpec: true, validateResponses: false })).resolves.toEqual(expect.any(Array));
    const broken = structuredClone(doc);
    broken.info = 'none' as unknown as OpenAPIV3.InfoObject;
    const printed = jest.spyOn(console, 'error').mockImplementation(() => undefined); // the library prints the errors too
    await expect(validatorOf(broken, paths, { validateApiSpec: true, validateResponses: false })).rejects.toThrow(/invalid/);
    printed.mockRestore();
  });
});
