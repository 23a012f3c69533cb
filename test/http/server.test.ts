import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHttpServer } from '../../src/http/server';
import { useHarness } from '../helpers/harness';

const ctx = useHarness('alice');

/** Serves one authenticated request through `server`: the request its handlers saw, and what it answered. */
async function servedRequest(
  server: Server,
  path: string,
  headers: Record<string, string>,
): Promise<{ req: IncomingMessage; status: number; body: unknown }> {
  let seen: IncomingMessage | undefined;
  server.prependListener('request', (req: IncomingMessage) => {
    seen = req;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`, { headers });
    const body: unknown = await res.json();
    return { req: seen as IncomingMessage, status: res.status, body };
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe('the service HTTP server', () => {
  test('a request is served with the fields the routes set', async () => {
    const service = await servedRequest(createHttpServer(ctx.h.runtime.app), '/api/v1/notes?limit=5', ctx.alice.auth);
    expect(service.status).toBe(200);
    expect(service.body).toMatchObject({ notes: [] });
    expect(service.req).toMatchObject({
      requestId: expect.any(String),
      caller: { userId: ctx.alice.userId },
      operation: { operationId: 'getNotes' },
    });
    // The query as the validator left it.
    expect((service.req as unknown as { query: unknown }).query).toEqual({ limit: 5, scope: 'all' });
  });

  test('a bad request is answered as before', async () => {
    const service = await servedRequest(createHttpServer(ctx.h.runtime.app), '/api/v1/notes?limit=0', ctx.alice.auth);
    expect(service.status).toBe(400);
    expect(service.body).toMatchObject({ code: 'invalid_request' });
  });
});
