import express from 'express';
import supertest from 'supertest';
import Transport from 'winston-transport';
import { errorMiddleware } from '../../src/http/error-middleware';
import { errors } from '../../src/platform/errors';
import { createLogger } from '../../src/platform/logger';

class Capture extends Transport {
  readonly entries: Record<string, unknown>[] = [];
  override log(info: Record<string, unknown>, next: () => void): void {
    this.entries.push(info);
    next();
  }
}

describe('unexpected errors', () => {
  test('are a 500 with the request id and no stack, SQL or secret', async () => {
    const logger = createLogger('silent');
    const app = express();
    app.use((req, _res, next) => {
      req.requestId = 'req-1';
      next();
    });
    app.get('/boom', () => {
      throw Object.assign(new Error('select * from secrets where password = hunter2'), { code: 'XX000' });
    });
    app.use(errorMiddleware(logger, { bodyLimitBytes: 1024, requireDeclaredStatus: false }));
    const res = await supertest(app).get('/boom');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: 'An unexpected error occurred.', code: 'internal_error', requestId: 'req-1' });
    expect(res.text).not.toMatch(/select|hunter2|at /);
  });
});

describe('error statuses the operation does not declare', () => {
  // Errors answered before the validator (authentication, role guard, body size) are not response-validated by it.
  const appWith = (requireDeclaredStatus: boolean) => {
    const app = express();
    app.use((req, _res, next) => {
      req.requestId = 'req-2';
      req.operation = { operationId: 'getNotes', security: [], statuses: new Set(['200', '401', '500']) };
      next();
    });
    app.get('/declared', () => {
      throw errors.unauthenticated('No token.');
    });
    app.get('/undeclared', () => {
      throw errors.payloadTooLarge('Too large.');
    });
    app.use(errorMiddleware(createLogger('silent'), { bodyLimitBytes: 1024, requireDeclaredStatus }));
    return supertest(app);
  };

  test('are answered as they are where the check is off (production)', async () => {
    expect((await appWith(false).get('/undeclared')).status).toBe(413);
  });

  test('become a 500 where answers are validated (tests), so a test sees the gap; declared ones pass', async () => {
    expect((await appWith(true).get('/declared')).status).toBe(401);
    const res = await appWith(true).get('/undeclared');
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ code: 'internal_error', requestId: 'req-2' });
  });
});

describe('logs', () => {
  test('redact tokens, cookies and secrets wherever they appear', () => {
    const logger = createLogger('info');
    const capture = new Capture();
    logger.clear().add(capture);
    logger.info('x', {
      accessToken: 'tok-1',
      nested: { Authorization: 'Bearer tok-2', cookie: 'c', fine: 'kept' },
      list: [{ secret: 's' }],
    });
    const text = JSON.stringify(capture.entries);
    expect(text).not.toMatch(/tok-1|tok-2|"c"|"s"/);
    expect(text).toContain('kept');
  });
});
