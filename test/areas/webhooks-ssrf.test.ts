import { signingSecretContext } from '../../src/areas/webhooks/signing';
import { uuidv7 } from '../../src/platform/ids';
import { useHarnessWith } from '../helpers/harness';
import { emit, eventually, type Receiver, startReceiver } from '../helpers/receiver';

// The deployment default: loopback receivers are refused like every other non-public address.
const SECRETS_KEY = 'a-test-key-for-sealing-webhook-secrets-000';
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());
const ctx = useHarnessWith(
  () => ({ WEBHOOK_SECRETS_KEY: SECRETS_KEY, WEBHOOK_POLL_INTERVAL_MS: '20', WEBHOOK_ALLOWED_PORTS: new URL(receiver.url).port }),
  'alice',
);

describe('webhook receivers must be public addresses', () => {
  test.each([
    'http://127.0.0.1/hook',
    'http://[::1]/hook',
    'http://[::ffff:127.0.0.1]/hook',
    'http://0.0.0.0/hook',
    'http://10.0.0.1/hook',
    'http://169.254.169.254/latest/meta-data',
    'http://localhost/hook',
    'http://localhost:8080/hook',
    'https://[fd00:ec2::254]/hook',
  ])('%s is refused when subscribing (400) and nothing is created', async (url) => {
    const res = await ctx.h
      .http()
      .post('/api/v1/webhooks')
      .set(ctx.alice.auth)
      .send({ url, events: ['chat.completed'] });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'invalid_request', details: [{ path: '/body/url', message: expect.any(String) }] });
    const list = await ctx.h.http().get('/api/v1/webhooks').set(ctx.alice.auth);
    expect(list.body.subscriptions).toEqual([]);
  });

  describe('checked again at delivery', () => {
    test('a receiver whose address became internal is not connected to; the attempt fails with the reason', async () => {
      // As if the name had resolved to a public address when the subscription was saved.
      const now = new Date();
      const subscriptionId = uuidv7();
      await ctx.h.runtime.database.db
        .insertInto('webhook_subscriptions')
        .values({
          id: subscriptionId,
          owner_user_id: ctx.alice.userId,
          url: receiver.url.replace('127.0.0.1', 'localhost'),
          events: ['chat.completed'],
          enabled: true,
          secret: ctx.h.runtime.secrets.seal('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw5uH7r9ZqQbk=', signingSecretContext(subscriptionId)),
          created_at: now,
          updated_at: now,
        })
        .execute();
      const eventId = await emit(ctx.h, ctx.alice.userId, 'chat.completed');
      const delivery = await eventually(async () => {
        const res = await ctx.h.http().get('/api/v1/webhooks/deliveries').query({ subscriptionId }).set(ctx.alice.auth);
        const found = res.body.deliveries.find((d: { eventId: string }) => d.eventId === eventId);
        return found?.attempts.length > 0 ? found : undefined;
      });
      expect(delivery.attempts[0]).toMatchObject({ outcome: 'failed', responseStatus: null, latencyMs: null });
      expect(delivery.attempts[0].error).toMatch(/^address not allowed: localhost resolves to (127\.0\.0\.1|::1), a loopback address$/);
      expect(receiver.connections()).toBe(0);
    });
  });
});
