import { accessLog, createLogger } from '../../src/platform/logger';

describe('access log', () => {
  const sink = () => {
    const writes: string[] = [];
    return { writes, out: { write: (chunk: string) => writes.push(chunk) } };
  };
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

  test("writes the logger's JSON fields, the lines of one turn in one write", async () => {
    const { writes, out } = sink();
    const log = accessLog(createLogger('info'), out);
    log({ message: 'request', requestId: 'r1', status: 200 });
    log({ message: 'request', requestId: 'r2', status: 404 });
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toHaveLength(1);
    const lines = (writes[0] as string).trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toEqual([
      { level: 'info', message: 'request', requestId: 'r1', status: 200, service: 'ai-workspace-service', timestamp: expect.any(String) },
      { level: 'info', message: 'request', requestId: 'r2', status: 404, service: 'ai-workspace-service', timestamp: expect.any(String) },
    ]);
    expect(Number.isNaN(Date.parse(lines[0]?.timestamp as string))).toBe(false);
  });

  test('writes nothing below the info level or when silent', async () => {
    for (const level of ['warn', 'silent'] as const) {
      const { writes, out } = sink();
      accessLog(createLogger(level), out)({ message: 'request', requestId: 'r1' });
      await nextTurn();
      expect(writes).toEqual([]);
    }
  });
});
