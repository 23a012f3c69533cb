import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import type supertest from 'supertest';
import { loadApiDocument, METHODS } from '../../src/http/openapi';
import { useHarnessWith } from '../helpers/harness';

/**
 * The headers every answer carries are declared on every response of every operation (the
 * document's "Response headers"), and the answers the service sends carry what is declared.
 */
const doc = loadApiDocument();
const EVERY_RESPONSE = ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'];
const RETRY_STATUSES = ['429', '503'];

function deref<T>(value: T | OpenAPIV3.ReferenceObject): T {
  let current: unknown = value;
  while (current && typeof current === 'object' && '$ref' in current) {
    current = (current.$ref as string)
      .slice(2)
      .split('/')
      .reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], doc);
  }
  return current as T;
}

function operations(): Array<{ key: string; path: string; method: string; op: OpenAPIV3.OperationObject }> {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.flatMap((method) => {
      const op = (item as Record<string, OpenAPIV3.OperationObject | undefined>)[method];
      return op ? [{ key: `${method.toUpperCase()} ${path}`, path, method, op }] : [];
    }),
  );
}

function declaredHeaders(path: string, method: string, status: number): Record<string, OpenAPIV3.HeaderObject> {
  const op = (doc.paths[path] as Record<string, OpenAPIV3.OperationObject>)[method]!;
  const response = deref<OpenAPIV3.ResponseObject>(op.responses![String(status)]!);
  return Object.fromEntries(Object.entries(response.headers ?? {}).map(([name, header]) => [name, deref<OpenAPIV3.HeaderObject>(header)]));
}

const ctx = useHarnessWith(() => ({ RATE_LIMIT_PER_MINUTE: '8' }), 'alice');

describe('response headers', () => {
  test('every response of every operation declares X-Request-Id and RateLimit-*, and 429 and 503 declare Retry-After', () => {
    const missing: string[] = [];
    for (const { key, op } of operations()) {
      for (const [status, ref] of Object.entries(op.responses ?? {})) {
        const names = new Set(Object.keys(deref<OpenAPIV3.ResponseObject>(ref).headers ?? {}));
        const wanted = [...EVERY_RESPONSE, ...(RETRY_STATUSES.includes(status) ? ['Retry-After'] : [])];
        const absent = wanted.filter((name) => !names.has(name));
        if (absent.length) missing.push(`${key} ${status}: ${absent.join(', ')}`);
      }
    }
    expect(missing).toEqual([]);
    expect(operations().length).toBeGreaterThan(40);
  });

  /** The answer carries each header its response declares as required, and the rate-limit ones when authenticated. */
  function expectDeclared(res: supertest.Response, path: string, method: string, authenticated: boolean): void {
    const declared = declaredHeaders(path, method, res.status);
    const expected = Object.entries(declared)
      .filter(([name, header]) => header.required || (authenticated && name.startsWith('RateLimit-')))
      .map(([name]) => name.toLowerCase());
    expect(expected).toEqual(expect.arrayContaining(['x-request-id']));
    const absent = expected.filter((name) => res.headers[name] === undefined);
    expect({ status: res.status, absent }).toEqual({ status: res.status, absent: [] });
  }

  test('every operation that takes a body declares its 413 (the body limit applies to all of them)', () => {
    const missing = operations()
      .filter(({ op }) => op.requestBody && !op.responses?.['413'])
      .map(({ key }) => key);
    expect(missing).toEqual([]);
  });

  test('the answers carry them: 200 (a read and a write), 400, 404, 401 and 429', async () => {
    const { h, alice } = ctx;
    const list = await h.http().get('/api/v1/notes').set(alice.auth);
    expect(list.status).toBe(200);
    expectDeclared(list, '/api/v1/notes', 'get', true);
    expect(list.headers['ratelimit-limit']).toBe('8');

    const created = await h.http().post('/api/v1/notes').set(alice.auth).send({ title: 'Headers', content: '' });
    expect(created.status).toBe(200);
    expectDeclared(created, '/api/v1/notes', 'post', true);

    const invalid = await h.http().get('/api/v1/notes?limit=0').set(alice.auth);
    expect(invalid.status).toBe(400);
    expectDeclared(invalid, '/api/v1/notes', 'get', true);

    const missing = await h.http().get('/api/v1/notes?noteId=no-such-note').set(alice.auth);
    expect(missing.status).toBe(404);
    expectDeclared(missing, '/api/v1/notes', 'get', true);

    const anonymous = await h.http().get('/api/v1/notes').set('X-Request-Id', 'support-ticket-42');
    expect(anonymous.status).toBe(401);
    expectDeclared(anonymous, '/api/v1/notes', 'get', false);
    expect(anonymous.headers['x-request-id']).toBe('support-ticket-42');

    let limited: supertest.Response | undefined;
    for (let i = 0; i < 8 && limited === undefined; i += 1) {
      const res = await h.http().get('/api/v1/projects').set(alice.auth);
      if (res.status === 429) limited = res;
    }
    expect(limited?.status).toBe(429);
    expectDeclared(limited!, '/api/v1/projects', 'get', true);
    expect(Number(limited!.headers['retry-after'])).toBeGreaterThan(0);
  });
});
