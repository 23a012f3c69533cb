import { execFileSync } from 'node:child_process';
import http, { type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { CONSTRUCT_WITH_APP_PROTOTYPES, createHttpServer } from '../../src/http/server';
import { useHarness } from '../helpers/harness';

const ctx = useHarness('alice');

/** Serves one authenticated request through `server`: the request and response its handlers saw, and their prototypes as Node handed them over. */
async function servedRequest(
  server: Server,
  path: string,
  headers: Record<string, string>,
): Promise<{ req: IncomingMessage; res: http.ServerResponse; prototypes: object[]; status: number; body: unknown }> {
  let seen: IncomingMessage | undefined;
  let answer: http.ServerResponse | undefined;
  let prototypes: object[] = [];
  server.prependListener('request', (req: IncomingMessage, res: http.ServerResponse) => {
    seen = req;
    answer = res;
    prototypes = [Object.getPrototypeOf(req) as object, Object.getPrototypeOf(res) as object];
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`, { headers });
    const body: unknown = await res.json();
    return { req: seen as IncomingMessage, res: answer as http.ServerResponse, prototypes, status: res.status, body };
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe('the service HTTP server', () => {
  test('a request is served with the fields the chain sets', async () => {
    const service = await servedRequest(createHttpServer(ctx.h.runtime.app), '/api/v1/notes?limit=5', ctx.alice.auth);
    expect(service.status).toBe(200);
    expect(service.body).toMatchObject({ notes: [] });
    expect(service.req).toMatchObject({ requestId: expect.any(String), caller: { userId: ctx.alice.userId }, operation: { operationId: 'getNotes' } });
    // The query as the validator left it.
    expect((service.req as unknown as { query: unknown }).query).toEqual({ limit: 5 });
  });

  test('on Node 20 only, requests and responses are constructed with the app’s prototypes', async () => {
    const app = ctx.h.runtime.app;
    expect(CONSTRUCT_WITH_APP_PROTOTYPES).toBe(Number(process.versions.node.split('.')[0]) < 22);
    const service = await servedRequest(createHttpServer(app), '/api/v1/notes?limit=5', ctx.alice.auth);
    expect(service.status).toBe(200);
    // As Node hands them to the app, before Express has touched them.
    expect(service.prototypes).toEqual(CONSTRUCT_WITH_APP_PROTOTYPES ? [app.request, app.response] : [http.IncomingMessage.prototype, http.ServerResponse.prototype]);
    // Either way, Express's request and response, still Node's.
    expect(Object.getPrototypeOf(service.req)).toBe(app.request);
    expect(Object.getPrototypeOf(service.res)).toBe(app.response);
    expect(service.req).toBeInstanceOf(http.IncomingMessage);
    expect(service.res).toBeInstanceOf(http.ServerResponse);
    expect(service.req.headers.authorization).toBe(ctx.alice.auth.Authorization);
    expect((service.res as unknown as { locals: unknown }).locals).toEqual({});
  });

  (CONSTRUCT_WITH_APP_PROTOTYPES ? test : test.skip)('on Node 20, its requests and responses keep their fields in the object, as Node’s own do', () => {
    // V8's own view of the objects' layout, which only a process started with natives syntax can ask for.
    const script = `
      const http = require('node:http');
      const net = require('node:net');
      const express = require('express');
      const { appConstructors } = require(${JSON.stringify(path.resolve(__dirname, '../../src/http/server'))});
      const { IncomingMessage, ServerResponse } = appConstructors(express());
      const fast = (object) => new Function('o', 'return %HasFastProperties(o)')(object);
      const built = () => { const req = new IncomingMessage(new net.Socket()); return [req, new ServerResponse(req)]; };
      for (let i = 0; i < 20; i += 1) built(); // past V8's sizing of the first objects
      const [req, res] = built();
      const [nodeReq, nodeRes] = [new http.IncomingMessage(new net.Socket()), new http.ServerResponse(new http.IncomingMessage(new net.Socket()))];
      console.log(JSON.stringify([fast(req), fast(res), fast(nodeReq), fast(nodeRes)]));`;
    const out = execFileSync(process.execPath, ['--allow-natives-syntax', '--import', 'tsx', '-e', script], { encoding: 'utf8', cwd: path.resolve(__dirname, '../..') });
    expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual([true, true, true, true]);
  });

  test('a bad request is answered as before', async () => {
    const service = await servedRequest(createHttpServer(ctx.h.runtime.app), '/api/v1/notes?limit=0', ctx.alice.auth);
    expect(service.status).toBe(400);
    expect(service.body).toMatchObject({ code: 'invalid_request' });
  });
});
