import { SEALED_COLUMNS } from '../../src/composition';
import { accessContext } from '../../src/areas/integrations/service';
import { apiKeyContext } from '../../src/areas/models/connections';
import { signingSecretContext } from '../../src/areas/webhooks/signing';
import { uuidv7 } from '../../src/platform/ids';
import { resealAll, Secrets } from '../../src/platform/secrets';
import { useHarnessWith } from '../helpers/harness';
import { type Receiver, startReceiver, subscribe, verify } from '../helpers/receiver';
import { keyEntry, sealV1 } from '../helpers/secrets';

// k2 seals, k1 still opens; the deprecated WEBHOOK_SECRETS_KEY opens what earlier versions sealed.
const WEBHOOK_SECRETS_KEY = 'the-webhook-secrets-key-of-an-earlier-version';
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());
const ctx = useHarnessWith(
  () => ({ SECRETS_KEY: `${keyEntry('k2', 2)},${keyEntry('k1', 1)}`, WEBHOOK_SECRETS_KEY, OUTBOUND_ALLOW_LOOPBACK: 'true' }),
  'alice',
  'bob',
);

const storedSecret = async (subscriptionId: string) =>
  ctx.h.runtime.database.db
    .selectFrom('webhook_subscriptions')
    .select(['secret', 'previous_secret'])
    .where('id', '=', subscriptionId)
    .executeTakeFirstOrThrow();

const sendTest = (user: { auth: { Authorization: string } }, subscriptionId: string) =>
  ctx.h.http().post('/api/v1/webhooks/test').set(user.auth).send({ subscriptionId });

describe('secrets at rest', () => {
  test('a webhook secret is stored sealed with the first SECRETS_KEY key and opens for its own subscription only', async () => {
    const { subscription, secret } = await subscribe(ctx.h, ctx.alice, receiver.url);
    const { secret: stored } = await storedSecret(subscription.subscriptionId);
    expect(stored).toMatch(/^s1:k2:[A-Za-z0-9_-]+$/);
    expect(stored).not.toContain(secret.slice(6));
    const sent = await sendTest(ctx.alice, subscription.subscriptionId);
    expect(sent.body.delivery).toMatchObject({ status: 'succeeded' });
    expect(verify(secret, receiver.received.at(-1)!).type).toBe('webhook.test');

    // The sealed value copied into another user's row does not open there: nothing is sent.
    const other = await subscribe(ctx.h, ctx.bob, `${receiver.url}?bob`);
    await ctx.h.runtime.database.db
      .updateTable('webhook_subscriptions')
      .set({ secret: stored })
      .where('id', '=', other.subscription.subscriptionId)
      .execute();
    const received = receiver.received.length;
    const refused = await sendTest(ctx.bob, other.subscription.subscriptionId);
    expect(refused.status).toBe(200);
    expect(refused.body.delivery).toMatchObject({ status: 'failed' });
    expect(refused.body.delivery.attempts[0].error).toMatch(/signing secret cannot be read/);
    expect(JSON.stringify(refused.body)).not.toContain(secret.slice(6));
    expect(receiver.received.length).toBe(received);
  });

  test('rotation re-seals every stored secret with the first key, earlier versions’ v1: secrets included', async () => {
    /** A subscription whose secrets are sealed (for its id) by `seal`, as an earlier version or key left them. */
    const insert = async (seal: (id: string) => { secret: string; previous?: string }) => {
      const id = uuidv7();
      const now = new Date();
      const { secret, previous = null } = seal(id);
      await ctx.h.runtime.database.db
        .insertInto('webhook_subscriptions')
        .values({
          id,
          owner_user_id: ctx.alice.userId,
          url: `${receiver.url}?${id}`,
          events: ['chat.completed'],
          enabled: true,
          secret,
          previous_secret: previous,
          previous_secret_expires_at: previous ? new Date(now.getTime() + 3_600_000) : null,
          created_at: now,
          updated_at: now,
        })
        .execute();
      return id;
    };
    const plain = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw5uH7r9ZqQbk=';
    const k1Only = new Secrets([{ id: 'k1', key: Buffer.alloc(32, 1) }]);
    const legacy = await insert(() => ({ secret: sealV1(WEBHOOK_SECRETS_KEY, plain) }));
    const older = await insert((id) => ({
      secret: k1Only.seal(plain, signingSecretContext(id)),
      previous: sealV1(WEBHOOK_SECRETS_KEY, 'whsec_previous'),
    }));
    const lost = await insert(() => ({ secret: new Secrets([{ id: 'k9', key: Buffer.alloc(32, 9) }]).seal(plain, 'x') }));

    const report = await resealAll(ctx.h.runtime.database.db, ctx.h.runtime.secrets, SEALED_COLUMNS);
    expect(report.resealed).toBe(3);
    expect(report.unreadable).toEqual([
      expect.objectContaining({ table: 'webhook_subscriptions', column: 'secret', id: lost, reason: expect.stringContaining('"k9"') }),
    ]);
    for (const id of [legacy, older]) {
      const row = await storedSecret(id);
      expect(row.secret).toMatch(/^s1:k2:/);
      expect(ctx.h.runtime.secrets.open(row.secret, signingSecretContext(id))).toBe(plain);
    }
    expect(ctx.h.runtime.secrets.open((await storedSecret(older)).previous_secret as string, signingSecretContext(older))).toBe(
      'whsec_previous',
    );
    expect((await storedSecret(lost)).secret).toMatch(/^s1:k9:/);
    // What was re-sealed still signs deliveries the receiver verifies with the secret it knows.
    const sent = await sendTest(ctx.alice, legacy);
    expect(sent.body.delivery).toMatchObject({ status: 'succeeded' });
    expect(verify(plain, receiver.received.at(-1)!).type).toBe('webhook.test');
    expect((await resealAll(ctx.h.runtime.database.db, ctx.h.runtime.secrets, SEALED_COLUMNS)).resealed).toBe(0);
  });

  test('rotation re-seals the API keys of model provider connections too', async () => {
    const created = await ctx.h
      .http()
      .post('/api/v1/model-providers')
      .set(ctx.alice.auth)
      .send({ kind: 'openai', name: 'Rotated', apiKey: 'sk-rotate-me' });
    expect(created.status).toBe(200);
    const id = created.body.connection.connectionId as string;
    const { db } = ctx.h.runtime.database;
    const stored = () => db.selectFrom('model_connections').select('api_key').where('id', '=', id).executeTakeFirstOrThrow();
    expect((await stored()).api_key).toMatch(/^s1:k2:/);
    const k1Only = new Secrets([{ id: 'k1', key: Buffer.alloc(32, 1) }]);
    await db
      .updateTable('model_connections')
      .set({ api_key: k1Only.seal('sk-rotate-me', apiKeyContext(id)) })
      .where('id', '=', id)
      .execute();
    const report = await resealAll(db, ctx.h.runtime.secrets, SEALED_COLUMNS);
    expect(report.resealed).toBe(1);
    const { api_key } = await stored();
    expect(api_key).toMatch(/^s1:k2:/);
    expect(ctx.h.runtime.secrets.open(api_key as string, apiKeyContext(id))).toBe('sk-rotate-me');
  });

  test('rotation re-seals the tokens of integration connections too', async () => {
    const { db } = ctx.h.runtime.database;
    const id = uuidv7();
    const k1Only = new Secrets([{ id: 'k1', key: Buffer.alloc(32, 1) }]);
    const now = new Date();
    await db
      .insertInto('integration_connections')
      .values({
        id,
        owner_user_id: ctx.alice.userId,
        integration_id: 'github',
        access_token: k1Only.seal('gho_rotate-me', accessContext(id)),
        token_type: 'bearer',
        created_at: now,
        updated_at: now,
      })
      .execute();
    const report = await resealAll(db, ctx.h.runtime.secrets, SEALED_COLUMNS);
    expect(report.resealed).toBe(1);
    expect(report.unreadable.filter((u) => u.table === 'integration_connections')).toEqual([]);
    const { access_token } = await db
      .selectFrom('integration_connections')
      .select('access_token')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(access_token).toMatch(/^s1:k2:/);
    expect(ctx.h.runtime.secrets.open(access_token, accessContext(id))).toBe('gho_rotate-me');
  });
});
