import { createFile, storeFile } from '../helpers/files';
import { useHarnessWith } from '../helpers/harness';

// A deployment provider with model ids holding `:` (never called here: no chat is sent).
const ctx = useHarnessWith(
  () => ({ MODEL_PROVIDER_BASE_URL: 'http://127.0.0.1:9/v1', MODEL_PROVIDER_MODELS: 'llama3.1:8b,qwen2.5:7b:0:0' }),
  'alice',
  'bob',
  'carol',
);

const settingsOf = async (auth: { Authorization: string }) => {
  const res = await ctx.h.http().get('/api/v1/settings').set(auth);
  expect(res.status).toBe(200);
  return res.body.settings;
};

describe('settings', () => {
  test('a new user reads the deployment defaults, every typed field inherited', async () => {
    expect(await settingsOf(ctx.carol.auth)).toEqual({
      defaultChatModel: 'llama3.1:8b',
      defaultImageModel: null,
      defaultTranscriptionModel: null,
      defaultSpeechModel: null,
      defaultEmbeddingsModel: null,
      memoryInChat: true,
      knowledgeInChat: false,
      toolApproval: 'ask_for_changes',
      locale: 'en-US',
      timeZone: 'UTC',
      theme: 'system',
      autoTitles: true,
      ui: {},
      inherited: [
        'defaultChatModel',
        'defaultImageModel',
        'defaultTranscriptionModel',
        'defaultSpeechModel',
        'defaultEmbeddingsModel',
        'memoryInChat',
        'knowledgeInChat',
        'toolApproval',
        'locale',
        'timeZone',
        'theme',
        'autoTitles',
      ],
      updatedAt: null,
    });
  });

  test('PATCH changes only the fields present, canonicalizes locale and time zone, and null resets to the default', async () => {
    const { alice } = ctx;
    const first = await ctx.h
      .http()
      .patch('/api/v1/settings')
      .set(alice.auth)
      .send({
        defaultChatModel: 'qwen2.5:7b',
        theme: 'dark',
        locale: 'en-gb',
        timeZone: 'europe/berlin',
        knowledgeInChat: true,
        toolApproval: 'always_ask',
        ui: { sidebar: 'collapsed', editor: { fontSize: 14 } },
      });
    expect(first.status).toBe(200);
    expect(first.body.settings).toMatchObject({
      defaultChatModel: 'qwen2.5:7b',
      theme: 'dark',
      locale: 'en-GB',
      timeZone: 'Europe/Berlin',
      knowledgeInChat: true,
      memoryInChat: true,
      toolApproval: 'always_ask',
      ui: { sidebar: 'collapsed', editor: { fontSize: 14 } },
    });
    expect(first.body.settings.inherited).toEqual([
      'defaultImageModel',
      'defaultTranscriptionModel',
      'defaultSpeechModel',
      'defaultEmbeddingsModel',
      'memoryInChat',
      'autoTitles',
    ]);
    expect(first.body.settings.updatedAt).toEqual(expect.any(Number));

    const second = await ctx.h.http().patch('/api/v1/settings').set(alice.auth).send({ theme: 'light', defaultChatModel: null });
    expect(second.status).toBe(200);
    expect(second.body.settings).toMatchObject({
      theme: 'light',
      defaultChatModel: 'llama3.1:8b',
      locale: 'en-GB',
      timeZone: 'Europe/Berlin',
      knowledgeInChat: true,
    });
    expect(second.body.settings.inherited).toContain('defaultChatModel');
    expect(await settingsOf(alice.auth)).toEqual(second.body.settings);

    const emptied = await ctx.h.http().patch('/api/v1/settings').set(alice.auth).send({ ui: null, toolApproval: null });
    expect(emptied.body.settings).toMatchObject({ ui: {}, toolApproval: 'ask_for_changes', theme: 'light' });
    // Repeating an update is harmless; an empty one changes nothing.
    const again = await ctx.h.http().patch('/api/v1/settings').set(alice.auth).send({});
    expect({ ...again.body.settings, updatedAt: 0 }).toEqual({ ...emptied.body.settings, updatedAt: 0 });
  });

  test('defaultModels gives the caller’s choice, else the deployment’s default', async () => {
    const { h, bob } = ctx;
    expect(await h.runtime.services.settings.defaultModels(bob.userId)).toEqual({ chat: 'llama3.1:8b' });
    await h.http().patch('/api/v1/settings').set(bob.auth).send({ defaultChatModel: 'qwen2.5:7b' });
    expect(await h.runtime.services.settings.defaultModels(bob.userId)).toEqual({ chat: 'qwen2.5:7b' });
    await h.http().patch('/api/v1/settings').set(bob.auth).send({ defaultChatModel: null });
  });

  test('bad input is 400 naming the field, and changes nothing', async () => {
    const { h } = ctx;
    const user = await h.newUser('dave');
    await h.http().patch('/api/v1/settings').set(user.auth).send({ theme: 'dark' });
    const before = await settingsOf(user.auth);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ theme: 'light', fontSize: 12 }, '/body/fontSize'],
      [{ theme: 'light', timeZone: 'Mars/Olympus_Mons' }, '/body/timeZone'],
      [{ theme: 'light', timeZone: '+01:00' }, '/body/timeZone'],
      [{ theme: 'light', locale: 'en_US' }, '/body/locale'],
      [{ theme: 'light', locale: 'toolonglanguage' }, '/body/locale'],
      [{ theme: 'light', defaultChatModel: 'gpt-4o' }, '/body/defaultChatModel'],
      // Available, but not of that kind.
      [{ theme: 'light', defaultImageModel: 'llama3.1:8b' }, '/body/defaultImageModel'],
      [{ theme: 'sepia' }, '/body/theme'],
      [{ toolApproval: 'never' }, '/body/toolApproval'],
      [{ memoryInChat: 'yes' }, '/body/memoryInChat'],
      [{ theme: 'light', ui: { blob: 'x'.repeat(16 * 1024) } }, '/body/ui'],
      [{ ui: ['not', 'an', 'object'] }, '/body/ui'],
    ];
    for (const [body, path] of cases) {
      const res = await h.http().patch('/api/v1/settings').set(user.auth).send(body);
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: 'invalid_request' });
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    expect(await settingsOf(user.auth)).toEqual(before);
    // Just under the limit is accepted.
    const fits = await h
      .http()
      .patch('/api/v1/settings')
      .set(user.auth)
      .send({ ui: { blob: 'x'.repeat(16 * 1024 - 20) } });
    expect(fits.status).toBe(200);
  });

  test('another user’s settings are neither read nor changed', async () => {
    const { h } = ctx;
    const erin = await h.newUser('erin');
    const frank = await h.newUser('frank');
    await h
      .http()
      .patch('/api/v1/settings')
      .set(erin.auth)
      .send({ theme: 'dark', locale: 'de-DE', ui: { private: true } });
    const franks = await settingsOf(frank.auth);
    expect(franks).toMatchObject({ theme: 'system', locale: 'en-US', ui: {}, updatedAt: null });
    await h.http().patch('/api/v1/settings').set(frank.auth).send({ theme: 'light' });
    expect(await settingsOf(erin.auth)).toMatchObject({ theme: 'dark', locale: 'de-DE', ui: { private: true } });
    // A body naming another user is not a setting.
    const other = await h.http().patch('/api/v1/settings').set(frank.auth).send({ userId: erin.userId, theme: 'dark' });
    expect(other.status).toBe(400);
  });

  test('401 without credentials', async () => {
    expect((await ctx.h.http().get('/api/v1/settings')).status).toBe(401);
    expect((await ctx.h.http().patch('/api/v1/settings').send({ theme: 'dark' })).status).toBe(401);
  });
});

const onboardingOf = async (auth: { Authorization: string }) => {
  const res = await ctx.h.http().get('/api/v1/onboarding').set(auth);
  expect(res.status).toBe(200);
  return res.body.onboarding;
};
const doneOf = (onboarding: { steps: Array<{ step: string; done: boolean; doneBy: string | null }> }) =>
  Object.fromEntries(onboarding.steps.map((s) => [s.step, s.doneBy]));

describe('onboarding', () => {
  test('the deployment’s steps, none done for a new user', async () => {
    const user = await ctx.h.newUser('newcomer');
    expect(await onboardingOf(user.auth)).toEqual({
      steps: ['profile', 'model', 'first_project', 'first_file'].map((step) => ({ step, done: false, doneBy: null, completedAt: null })),
      completed: false,
    });
  });

  test('data steps are done when the user’s data shows them', async () => {
    const { h } = ctx;
    const user = await h.newUser('maker');
    await h.http().post('/api/v1/projects').set(user.auth).send({ name: 'First' });
    // A file whose content is not stored yet, and a folder, do not count.
    await createFile(h, user, { name: 'later.txt', mimeType: 'text/plain', sizeBytes: 3 });
    await createFile(h, user, { name: 'Folder', kind: 'folder' });
    expect(doneOf(await onboardingOf(user.auth))).toEqual({ profile: null, model: null, first_project: 'data', first_file: null });
    await storeFile(h, user, 'notes.txt', 'text/plain', Buffer.from('hello'));
    await h.http().patch('/api/v1/settings').set(user.auth).send({ defaultChatModel: 'llama3.1:8b' });
    expect(doneOf(await onboardingOf(user.auth))).toEqual({ profile: null, model: 'data', first_project: 'data', first_file: 'data' });
  });

  test('complete marks a step or all of them, keeps the first time, and reset clears the marks', async () => {
    const { h } = ctx;
    const user = await h.newUser('walker');
    const one = await h.http().post('/api/v1/onboarding/complete').set(user.auth).send({ step: 'profile' });
    expect(one.status).toBe(200);
    const profile = one.body.onboarding.steps[0];
    expect(profile).toEqual({ step: 'profile', done: true, doneBy: 'completed', completedAt: expect.any(Number) });
    const again = await h.http().post('/api/v1/onboarding/complete').set(user.auth).send({ step: 'profile' });
    expect(again.body.onboarding.steps[0]).toEqual(profile);

    const all = await h.http().post('/api/v1/onboarding/complete').set(user.auth).send({ all: true });
    expect(all.body.onboarding.completed).toBe(true);
    expect(all.body.onboarding.steps[0]).toEqual(profile);

    await h.http().post('/api/v1/projects').set(user.auth).send({ name: 'Kept' });
    const oneReset = await h.http().post('/api/v1/onboarding/reset').set(user.auth).send({ step: 'first_project' });
    expect(oneReset.status).toBe(200);
    // Still done: the data shows it.
    expect(doneOf(oneReset.body.onboarding)).toEqual({
      profile: 'completed',
      model: 'completed',
      first_project: 'data',
      first_file: 'completed',
    });
    const reset = await h.http().post('/api/v1/onboarding/reset').set(user.auth);
    expect(reset.status).toBe(200);
    expect(reset.body.onboarding).toMatchObject({ completed: false });
    expect(doneOf(reset.body.onboarding)).toEqual({ profile: null, model: null, first_project: 'data', first_file: null });
    const resetEmpty = await h.http().post('/api/v1/onboarding/reset').set(user.auth).send({});
    expect(resetEmpty.body.onboarding).toEqual(reset.body.onboarding);
  });

  test('an unknown step, or neither or both of step and all, is 400 and changes nothing', async () => {
    const { h } = ctx;
    const user = await h.newUser('strict');
    await h.http().post('/api/v1/onboarding/complete').set(user.auth).send({ step: 'profile' });
    const before = await onboardingOf(user.auth);
    const bad: Array<[string, Record<string, unknown>]> = [
      ['complete', { step: 'tour' }],
      ['complete', {}],
      ['complete', { step: 'model', all: true }],
      ['complete', { all: false }],
      ['complete', { step: 'Profile!' }],
      ['complete', { steps: ['profile'] }],
      ['reset', { step: 'tour' }],
      ['reset', { all: true }],
    ];
    for (const [action, body] of bad) {
      const res = await h.http().post(`/api/v1/onboarding/${action}`).set(user.auth).send(body);
      expect({ action, body, status: res.status, code: res.body.code }).toEqual({ action, body, status: 400, code: 'invalid_request' });
    }
    expect(await onboardingOf(user.auth)).toEqual(before);
    // The document's oneOf says it, and the answer names the fields.
    const neither = await h.http().post('/api/v1/onboarding/complete').set(user.auth).send({});
    expect(neither.body.details).toEqual(
      expect.arrayContaining([
        { path: '/body/step', message: "must have required property 'step'" },
        { path: '/body/all', message: "must have required property 'all'" },
      ]),
    );
    const both = await h.http().post('/api/v1/onboarding/complete').set(user.auth).send({ step: 'model', all: true });
    expect(both.body).toMatchObject({
      code: 'invalid_request',
      details: [{ path: '/body', message: 'must have exactly one of step and all' }],
    });
  });

  test('another user’s onboarding is neither read nor changed', async () => {
    const { h } = ctx;
    const grace = await h.newUser('grace');
    const heidi = await h.newUser('heidi');
    await h.http().post('/api/v1/onboarding/complete').set(grace.auth).send({ all: true });
    await h.http().post('/api/v1/projects').set(grace.auth).send({ name: 'Grace’s' });
    expect(doneOf(await onboardingOf(heidi.auth))).toEqual({ profile: null, model: null, first_project: null, first_file: null });
    await h.http().post('/api/v1/onboarding/reset').set(heidi.auth);
    expect((await onboardingOf(grace.auth)).completed).toBe(true);
  });

  test('401 without credentials', async () => {
    expect((await ctx.h.http().get('/api/v1/onboarding')).status).toBe(401);
    expect((await ctx.h.http().post('/api/v1/onboarding/complete').send({ all: true })).status).toBe(401);
    expect((await ctx.h.http().post('/api/v1/onboarding/reset')).status).toBe(401);
  });
});
