import { Writable } from 'node:stream';
import winston from 'winston';
import { redactSecrets } from '../../src/platform/logger';
import { startHarness } from '../helpers/harness';

describe('access log', () => {
  test('winston writes one entry per request: id, operation, user, status, latency, and no credentials', async () => {
    const entries: Array<Record<string, unknown>> = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        entries.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const logger = winston.createLogger({
      level: 'info',
      format: winston.format.combine(redactSecrets(), winston.format.json()),
      transports: [new winston.transports.Stream({ stream })],
    });
    const h = await startHarness({}, { logger });
    try {
      const user = await h.newUser('logged');
      const res = await h.http().get('/api/v1/notes?limit=5').set(user.auth).set('X-Request-Id', 'access-log-1').expect(200);
      expect(res.headers['x-request-id']).toBe('access-log-1');
      await h.http().get('/api/v1/notes?limit=500').set(user.auth).set('X-Request-Id', 'access-log-2').expect(400);
      const lines = entries.filter((entry) => entry.message === 'request');
      expect(lines.find((entry) => entry.requestId === 'access-log-1')).toEqual({
        level: 'info',
        message: 'request',
        requestId: 'access-log-1',
        operationId: 'getNotes',
        userId: user.userId,
        method: 'GET',
        path: '/api/v1/notes',
        status: 200,
        latencyMs: expect.any(Number),
      });
      expect(lines.find((entry) => entry.requestId === 'access-log-2')).toMatchObject({ operationId: 'getNotes', status: 400 });
      expect(JSON.stringify(entries)).not.toContain(user.token);
    } finally {
      await h.close();
    }
  });
});

describe('redaction', () => {
  test('values of credential fields are never logged, at any depth', () => {
    const entry = redactSecrets().transform({
      level: 'info',
      message: 'connection tested',
      apiKey: 'sk-live-1',
      connection: {
        api_key: 'sk-live-2',
        credentials: { clientSecret: 'cs' },
        headers: { 'x-api-key': 'sk-live-3', Authorization: 'Bearer t' },
      },
      mcp: [{ accessToken: 'at', refresh_token: 'rt', privateKey: 'pk' }],
      provider: 'openai',
    }) as Record<string, unknown>;
    const text = JSON.stringify(entry);
    for (const secret of ['sk-live-1', 'sk-live-2', 'sk-live-3', '"cs"', 'Bearer t', '"at"', '"rt"', '"pk"'])
      expect(text).not.toContain(secret);
    expect(entry).toMatchObject({
      apiKey: '[redacted]',
      provider: 'openai',
      connection: { api_key: '[redacted]', credentials: '[redacted]' },
    });
  });
});
