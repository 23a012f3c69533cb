import { Counter, Histogram, Registry } from 'prom-client';
import { Metrics } from '../../src/platform/metrics';

const probe = { pendingDeliveries: async () => 0, queuedRuns: async () => 0, pool: () => null };

describe('requestAnswered', () => {
  test('reports what counting each request directly in the counter and histogram reports', async () => {
    const metrics = new Metrics(probe);
    const registry = new Registry();
    const requests = new Counter({ name: 'http_requests_total', help: 'Requests answered, by operation and status.', labelNames: ['operation', 'method', 'status'] as const, registers: [registry] });
    const latency = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time to answer a request, by operation.',
      labelNames: ['operation'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    const answers: Array<[string, string, number, number]> = [
      ['getNotes', 'GET', 200, 0.0042],
      ['other', 'GET', 404, 0.001],
      ['getNotes', 'GET', 400, 0.02],
      ['createNote', 'POST', 201, 0.3],
      ['getNotes', 'HEAD', 200, 0.004],
      ['getNotes', 'GET', 200, 12],
    ];
    const report = async () => {
      const [mine, direct] = await Promise.all([
        Promise.all([metrics.requests.get(), metrics.latency.get()]),
        Promise.all([requests.get(), latency.get()]),
      ]);
      expect(mine).toEqual(direct);
    };
    for (const [i, [operation, method, status, seconds]] of answers.entries()) {
      metrics.requestAnswered(operation, method, status, seconds);
      requests.inc({ operation, method, status: String(status) });
      latency.observe({ operation }, seconds);
      // Read between some answers and not others: a tally is added once, whenever it is read.
      if (i % 2 === 1) await report();
    }
    await report();
    await report();
    const text = await metrics.registry.getSingleMetricAsString('http_requests_total');
    expect(text).toBe(await registry.getSingleMetricAsString('http_requests_total'));
    expect(text).toContain('http_requests_total{operation="getNotes",method="GET",status="200"} 2');
  });
});
