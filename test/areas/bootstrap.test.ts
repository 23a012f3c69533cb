import { createHash } from 'node:crypto';
import { useHarnessWith, userNamed } from '../helpers/harness';

const ctx = useHarnessWith(
  () => ({ BOOTSTRAP_ADMIN_USER_IDS: 'shell-root', ONBOARDING_STEPS: 'profile,first_project,tour' }),
  'alice',
  'bob',
);

const bootstrapOf = async (auth: { Authorization: string }, etag?: string) => {
  const req = ctx.h.http().get('/api/v1/bootstrap').set(auth);
  return etag === undefined ? req : req.set('If-None-Match', etag);
};

describe('bootstrap', () => {
  test('one call answers what the shell needs, each part as its own route answers it', async () => {
    const { h, alice } = ctx;
    await h
      .http()
      .patch('/api/v1/settings')
      .set(alice.auth)
      .send({ theme: 'dark', ui: { pane: 'left' } });
    const res = await bootstrapOf(alice.auth);
    expect(res.status).toBe(200);
    const b = res.body.bootstrap;
    const get = async (path: string) => (await h.http().get(path).set(alice.auth)).body;
    expect(b.user).toEqual({ userId: alice.userId, roles: [] });
    expect(b.capabilities).toEqual((await get('/api/v1/capabilities')).capabilities);
    expect(b.settings).toEqual((await get('/api/v1/settings')).settings);
    expect(b.settings).toMatchObject({ theme: 'dark', ui: { pane: 'left' } });
    expect(b.onboarding).toEqual((await get('/api/v1/onboarding')).onboarding);
    expect(b.onboarding.steps.map((s: { step: string }) => s.step)).toEqual(['profile', 'first_project', 'tour']);
    expect(b.models).toEqual({
      available: [
        { modelId: 'development', kinds: ['chat', 'vision'] },
        { modelId: 'development-image', kinds: ['image'] },
        { modelId: 'development-transcription', kinds: ['transcription'] },
        { modelId: 'development-speech', kinds: ['speech'] },
      ],
      defaults: {
        chat: 'development',
        image: 'development-image',
        transcription: 'development-transcription',
        speech: 'development-speech',
      },
    });
    const subscription = (await get('/api/v1/subscription')).subscription;
    expect(b.subscription).toEqual({
      plan: subscription.plan,
      status: subscription.status,
      provider: subscription.provider,
      periodEnd: subscription.usage.periodEnd,
      entitlements: subscription.entitlements,
      spentCents: subscription.usage.spentCents,
      availableCents: subscription.usage.availableCents,
    });
    expect(b.subscription).toMatchObject({ plan: 'self_hosted', status: 'none', provider: 'none' });
    expect(b.limits).toEqual({
      maxUploadBytes: h.runtime.config.storage.maxUploadBytes,
      maxMessageChars: 100_000,
      maxUiSettingsBytes: 16 * 1024,
      rateLimitPerMinute: h.runtime.config.rateLimitPerMinute,
    });
  });

  test('a strong ETag over the body; If-None-Match with it is 304 without a body', async () => {
    const { alice } = ctx;
    const first = await bootstrapOf(alice.auth);
    const etag = first.headers.etag as string;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    expect(etag).toBe(`"${createHash('sha256').update(first.text).digest('base64url')}"`);
    expect(first.headers['cache-control']).toBe('private, no-cache');

    const same = await bootstrapOf(alice.auth, etag);
    expect(same.status).toBe(304);
    expect(same.text ?? '').toBe('');
    expect(same.headers.etag).toBe(etag);
    expect((await bootstrapOf(alice.auth, `"other", W/${etag}`)).status).toBe(304);
    expect((await bootstrapOf(alice.auth, '"other"')).status).toBe(200);
    // The same state, read again, has the same tag.
    expect((await bootstrapOf(alice.auth)).headers.etag).toBe(etag);
  });

  test('the ETag changes when any part changes: a setting, onboarding, a project, a role, a capability', async () => {
    const { h } = ctx;
    const user = await h.newUser('changer');
    const tags = [(await bootstrapOf(user.auth)).headers.etag as string];
    const changed = async (change: () => Promise<unknown>) => {
      await change();
      const res = await bootstrapOf(user.auth, tags[tags.length - 1]);
      expect(res.status).toBe(200);
      expect(tags).not.toContain(res.headers.etag);
      tags.push(res.headers.etag as string);
    };
    await changed(() => h.http().patch('/api/v1/settings').set(user.auth).send({ theme: 'light' }));
    await changed(() => h.http().post('/api/v1/onboarding/complete').set(user.auth).send({ step: 'tour' }));
    await changed(() => h.http().post('/api/v1/projects').set(user.auth).send({ name: 'Shows in onboarding' }));
    const root = await userNamed(h, 'shell-root');
    await changed(() =>
      h.http().post('/api/v1/admin/principals').set(root.auth).send({ userId: user.userId, role: 'auditor', reason: 'test' }),
    );
    expect((await bootstrapOf(user.auth)).body.bootstrap.user.roles).toEqual(['auditor']);
    await changed(() => h.http().patch('/api/v1/admin/capabilities').set(root.auth).send({ automations: false }));
    expect((await bootstrapOf(user.auth)).body.bootstrap.capabilities.automations).toBe(false);
    await h.http().patch('/api/v1/admin/capabilities').set(root.auth).send({ automations: true });
  });

  test('an administrator sees their roles; another user sees only their own state', async () => {
    const { h, alice, bob } = ctx;
    const root = await userNamed(h, 'shell-root');
    expect((await bootstrapOf(root.auth)).body.bootstrap.user).toEqual({ userId: 'shell-root', roles: ['admin'] });
    await h.http().patch('/api/v1/settings').set(alice.auth).send({ locale: 'fr-FR' });
    const alices = await bootstrapOf(alice.auth);
    const bobs = await bootstrapOf(bob.auth);
    expect(bobs.body.bootstrap.user.userId).toBe(bob.userId);
    expect(bobs.body.bootstrap.settings).toMatchObject({ locale: 'en-US', theme: 'system', ui: {} });
    // Alice's tag is not Bob's.
    expect((await bootstrapOf(bob.auth, alices.headers.etag as string)).status).toBe(200);
  });

  test('bad input is 400, and 401 without credentials', async () => {
    const { h, alice } = ctx;
    const bad = await h.http().get('/api/v1/bootstrap').query({ userId: 'someone' }).set(alice.auth);
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('invalid_request');
    const anonymous = await h.http().get('/api/v1/bootstrap');
    expect(anonymous.status).toBe(401);
    expect((await h.http().get('/api/v1/bootstrap').set('If-None-Match', '*')).status).toBe(401);
  });
});

describe('discovery in development mode', () => {
  test('no identity provider and no minimum client version: both null', async () => {
    const res = await ctx.h.http().get('/api/v1/discovery');
    expect(res.status).toBe(200);
    expect(res.body.discovery).toMatchObject({ minClientVersion: null, authentication: { oidc: null } });
  });
});
