import http from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import helmet from 'helmet';
import { API_HEADERS, DOCUMENT_HEADERS, securityHeaders } from '../../src/http/security-headers';

/** The headers a middleware leaves on a fresh response, by lower-case name. */
function headersAfter(middleware: RequestHandler): Record<string, unknown> {
  const req = new http.IncomingMessage(null as never);
  const res = new http.ServerResponse(req);
  res.setHeader('X-Powered-By', 'Express');
  let passed = false;
  void middleware(req as Request, res as Response, ((error?: unknown) => {
    expect(error).toBeUndefined();
    passed = true;
  }) as NextFunction);
  expect(passed).toBe(true);
  return res.getHeaders();
}

describe('security headers', () => {
  test('are exactly the ones helmet sets, for each request', () => {
    for (const options of [API_HEADERS, DOCUMENT_HEADERS]) {
      const expected = headersAfter(helmet(options));
      expect(expected).toMatchObject({ 'content-security-policy': expect.any(String), 'x-content-type-options': 'nosniff' });
      expect(expected['x-powered-by']).toBeUndefined();
      const middleware = securityHeaders(options);
      expect(headersAfter(middleware)).toEqual(expected);
      expect(headersAfter(middleware)).toEqual(expected);
    }
    expect(headersAfter(securityHeaders({ frameguard: { action: 'deny' } }))).toMatchObject({ 'x-frame-options': 'DENY' });
  });

  test('a per-request directive is refused at start-up rather than frozen', () => {
    expect(() =>
      securityHeaders({ contentSecurityPolicy: { directives: { scriptSrc: ["'self'", (_req, res) => `'nonce-${String((res as { nonce?: string }).nonce)}'`] } } }),
    ).toThrow();
  });
});
