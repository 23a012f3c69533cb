import { startHarness } from '../helpers/harness';
import { startReceiver, subscribe } from '../helpers/receiver';

const TOKEN = 'a-metrics-token-for-the-tests';

describe('GET /metrics', () => {
  test('is not served without METRICS_TOKEN', async () => {
    const h = await startHarness();
    try {
      expect((await h.http().get('/metrics')).status).toBe(404);
    } finally {
      await h.close();
    }
  });

  test('needs the token, then reports requests, queues, attempts and the process', async () => {
    const h = await startHarness({ METRICS_TOKEN: TOKEN, WEBHOOK_ALLOW_LOOPBACK: 'true' });
    const receiver = await startReceiver();
    try {
      expect((await h.http().get('/metrics')).status).toBe(401);
      expect((await h.http().get('/metrics').set('Authorization', 'Bearer not-the-token-at-all-x')).status).toBe(401);
      const user = await h.newUser('metrics');
      await h.http().get('/api/v1/projects').set(user.auth).expect(200);
      await h.http().get('/api/v1/projects').query({ limit: 500 }).set(user.auth).expect(400);
      const { subscription } = await subscribe(h, user, receiver.url, ['chat.completed']);
      await h.http().post('/api/v1/webhooks/test').set(user.auth).send({ subscriptionId: subscription.subscriptionId }).expect(200);

      const res = await h.http().get('/metrics').set('Authorization', `Bearer ${TOKEN}`);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/plain/);
      const text = res.text;
      expect(text).toContain('http_requests_total{operation="getProjects",method="GET",status="200"} 1');
      expect(text).toContain('http_requests_total{operation="getProjects",method="GET",status="400"} 1');
      expect(text).toMatch(/http_request_duration_seconds_bucket\{le="0\.005",operation="getProjects"\}/);
      expect(text).toContain('webhook_delivery_attempts_total{outcome="succeeded"} 1');
      expect(text).toMatch(/^webhook_deliveries_pending \d+$/m);
      expect(text).toMatch(/^automation_runs_queued \d+$/m);
      expect(text).toContain('process_cpu_user_seconds_total');
      if (h.runtime.database.kind === 'postgres') expect(text).toMatch(/db_pool_connections\{state="total"\} \d+/);
    } finally {
      await receiver.close();
      await h.close();
    }
  });
});
