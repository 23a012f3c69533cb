import { type AccessEntry, accessLog, createLogger, redactSecrets } from '../../src/platform/logger';

describe('access log', () => {
  const sink = () => {
    const writes: string[] = [];
    return { writes, out: { write: (chunk: string) => writes.push(chunk) } };
  };
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

  const entry = (requestId: string, more: Partial<AccessEntry> = {}): AccessEntry => ({
    requestId,
    operationId: 'listNotes',
    userId: 'alice',
    method: 'GET',
    path: '/api/v1/notes',
    status: 200,
    latencyMs: 1.25,
    ...more,
  });

  test("writes the logger's JSON fields, the lines of one turn in one write", async () => {
    const { writes, out } = sink();
    const log = accessLog(createLogger('info'), out);
    log(entry('r1'));
    // Strings that need escaping, and the fields an unauthenticated or undocumented request lacks.
    log(entry('r2', { operationId: undefined, userId: 'quote " back \\ tab \t ünïcode ✓ \u2028', path: '/x"\n', status: 404, latencyMs: 0.000123 }));
    log(entry('r3', { userId: undefined }));
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toHaveLength(1);
    const lines = (writes[0] as string).split('\n');
    expect(lines.pop()).toBe('');
    const expected = [
      entry('r1'),
      entry('r2', { operationId: undefined, userId: 'quote " back \\ tab \t ünïcode ✓ \u2028', path: '/x"\n', status: 404, latencyMs: 0.000123 }),
      entry('r3', { userId: undefined }),
    ];
    lines.forEach((line, i) => {
      const { timestamp } = JSON.parse(line) as { timestamp: string };
      expect(new Date(timestamp).toISOString()).toBe(timestamp);
      // Exactly what JSON.stringify writes for winston's fields in winston's order.
      const { requestId, operationId, userId, method, path, status, latencyMs } = expected[i] as AccessEntry;
      const fields = { level: 'info', message: 'request', requestId, operationId, userId, method, path, status, latencyMs, service: 'ai-workspace-service', timestamp };
      expect(line).toBe(JSON.stringify(fields));
    });
  });

  test("the timestamp is toISOString's of the moment the line is written", async () => {
    const { writes, out } = sink();
    const log = accessLog(createLogger('info'), out);
    const moments = [Date.UTC(2026, 10, 26, 23, 59, 59, 998), Date.UTC(2026, 10, 26, 23, 59, 59, 999), Date.UTC(2026, 10, 27), Date.UTC(2026, 10, 27, 0, 0, 0, 9), Date.UTC(2026, 10, 27, 0, 0, 0, 90), Date.UTC(2026, 10, 27, 0, 0, 1, 90), Date.UTC(2026, 10, 27, 0, 0, 0, 90)];
    const now = jest.spyOn(Date, 'now');
    try {
      for (const moment of moments) {
        now.mockReturnValue(moment);
        log(entry('r'));
      }
    } finally {
      now.mockRestore();
    }
    await nextTurn();
    const stamps = (writes.join('').trim().split('\n')).map((line) => (JSON.parse(line) as { timestamp: string }).timestamp);
    expect(stamps).toEqual(moments.map((moment) => new Date(moment).toISOString()));
  });

  test('writes nothing below the info level or when silent', async () => {
    for (const level of ['warn', 'silent'] as const) {
      const { writes, out } = sink();
      accessLog(createLogger(level), out)(entry('r1'));
      await nextTurn();
      expect(writes).toEqual([]);
    }
  });

  test('a change of level counts from the next turn', async () => {
    const { writes, out } = sink();
    const logger = createLogger('info');
    const log = accessLog(logger, out);
    log(entry('r1'));
    logger.level = 'warn';
    log(entry('r2'));
    await nextTurn();
    log(entry('r3'));
    await nextTurn();
    expect(writes.join('').trim().split('\n').map((line) => (JSON.parse(line) as { requestId: string }).requestId)).toEqual(['r1', 'r2']);
    logger.level = 'info';
    log(entry('r4'));
    await nextTurn();
    expect(writes).toHaveLength(2);
  });
});

describe('redaction', () => {
  test('values of credential fields are never logged, at any depth', () => {
    const entry = redactSecrets().transform({
      level: 'info',
      message: 'connection tested',
      apiKey: 'sk-live-1',
      connection: { api_key: 'sk-live-2', credentials: { clientSecret: 'cs' }, headers: { 'x-api-key': 'sk-live-3', Authorization: 'Bearer t' } },
      mcp: [{ accessToken: 'at', refresh_token: 'rt', privateKey: 'pk' }],
      provider: 'openai',
    }) as Record<string, unknown>;
    const text = JSON.stringify(entry);
    for (const secret of ['sk-live-1', 'sk-live-2', 'sk-live-3', '"cs"', 'Bearer t', '"at"', '"rt"', '"pk"']) expect(text).not.toContain(secret);
    expect(entry).toMatchObject({ apiKey: '[redacted]', provider: 'openai', connection: { api_key: '[redacted]', credentials: '[redacted]' } });
  });
});
