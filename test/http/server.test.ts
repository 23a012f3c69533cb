import http, { type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHttpServer } from '../../src/http/server';
import { useHarness } from '../helpers/harness';

const ctx = useHarness('alice');

/**
 * Serves one authenticated request through `server`: the request object its handlers saw, and the
 * fields it gained between its construction and the end of the answer.
 */
async function servedRequest(
  server: Server,
  path: string,
  headers: Record<string, string>,
): Promise<{ req: IncomingMessage; res: http.ServerResponse; prototypes: object[]; added: string[]; status: number; body: unknown }> {
  let seen: IncomingMessage | undefined;
  let answer: http.ServerResponse | undefined;
  let prototypes: object[] = [];
  let added: string[] = [];
  server.prependListener('request', (req: IncomingMessage, res: http.ServerResponse) => {
    seen = req;
    answer = res;
    prototypes = [Object.getPrototypeOf(req) as object, Object.getPrototypeOf(res) as object];
    const constructed = new Set(Object.getOwnPropertyNames(req));
    res.on('finish', () => {
      added = Object.getOwnPropertyNames(req).filter((name) => !constructed.has(name));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`, { headers });
    const body: unknown = await res.json();
    return { req: seen as IncomingMessage, res: answer as http.ServerResponse, prototypes, added, status: res.status, body };
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe('the service HTTP server', () => {
  test('a request is constructed with the fields the middleware sets, where a plain server’s gains them one by one', async () => {
    const path = '/api/v1/notes?limit=5';
    const service = await servedRequest(createHttpServer(ctx.h.runtime.app), path, ctx.alice.auth);
    expect(service.status).toBe(200);
    expect(service.body).toMatchObject({ notes: [] });
    // The fields the chain set are there, and the query as the validator left it.
    expect(service.req).toMatchObject({ requestId: expect.any(String), caller: { userId: ctx.alice.userId } });
    expect((service.req as unknown as { query: unknown }).query).toEqual({ limit: 5 });
    // Added on the way: only the validator's own `query` (see ServiceRequest) and the stream's
    // listener count, which Node sets at the first listener.
    expect(service.added.sort()).toEqual(['_eventsCount', 'query']);

    const plain = await servedRequest(http.createServer(ctx.h.runtime.app), path, ctx.alice.auth);
    expect(plain.status).toBe(200);
    expect((plain.req as unknown as { query: unknown }).query).toEqual({ limit: 5 });
    expect(plain.added).toEqual(expect.arrayContaining(['requestId', 'cookies', 'openapi', 'caller', 'query']));
  });

  test('requests and responses are constructed with the app’s prototypes, which Express then sets again to no effect', async () => {
    const app = ctx.h.runtime.app;
    const service = await servedRequest(createHttpServer(app), '/api/v1/notes?limit=5', ctx.alice.auth);
    expect(service.status).toBe(200);
    // As Node hands them to the app, before Express has touched them.
    expect(service.prototypes).toEqual([app.request, app.response]);
    expect(Object.getPrototypeOf(service.req)).toBe(app.request);
    expect(Object.getPrototypeOf(service.res)).toBe(app.response);
    // Still Node's request and response, with Express's methods.
    expect(service.req).toBeInstanceOf(http.IncomingMessage);
    expect(service.res).toBeInstanceOf(http.ServerResponse);
    expect(service.req.headers.authorization).toBe(ctx.alice.auth.Authorization);
    expect((service.res as unknown as { locals: unknown }).locals).toEqual({});

    const plain = await servedRequest(http.createServer(app), '/api/v1/notes?limit=5', ctx.alice.auth);
    expect(plain.prototypes).toEqual([http.IncomingMessage.prototype, http.ServerResponse.prototype]);
    expect(Object.getPrototypeOf(plain.req)).toBe(app.request);
  });

  test('a bad request is answered as before', async () => {
    const service = await servedRequest(createHttpServer(ctx.h.runtime.app), '/api/v1/notes?limit=0', ctx.alice.auth);
    expect(service.status).toBe(400);
    expect(service.body).toMatchObject({ code: 'invalid_request' });
  });
});
