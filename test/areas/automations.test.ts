import { AutomationScheduler } from '../../src/areas/automations/runner';
import { describeCrudContract } from '../helpers/crud-contract';
import { binaryBody, type TestUser, useHarnessWith } from '../helpers/harness';
import { useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually, subscribe, verify } from '../helpers/receiver';

const servers = useFakeModelAndReceiver();
// The run timeout is the default (minutes): only the run-timeout test, on its own harness, waits on it.
const env = () => ({
  MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
  MODEL_PROVIDER_MODELS: 'test-model:100:200',
  AUTOMATION_POLL_INTERVAL_MS: '20',
  AUTOMATION_MAX_CONCURRENT_RUNS: '2',
  AUTOMATION_TICK_CRON: '0 0 0 1 1 *', // the tests tick the scheduler themselves
  CAPABILITY_CACHE_MS: '0',
  WEBHOOK_ALLOW_LOOPBACK: 'true',
  WEBHOOK_POLL_INTERVAL_MS: '20',
});
const ctx = useHarnessWith(env, 'alice', 'bob');
beforeEach(() => {
  servers.model.behaviour = () => ({ kind: 'reply', chunks: ['- Four notes reviewed.'] });
});

type Run = {
  runId: string;
  status: string;
  attempt: number;
  errorCode: string | null;
  outputs: { outputId: string; mimeType: string }[];
  usage: unknown;
};

async function automation(user: TestUser, body: Record<string, unknown> = {}): Promise<string> {
  const res = await ctx.h
    .http()
    .post('/api/v1/automations')
    .set(user.auth)
    .send({ name: `Briefing ${Math.random()}`, prompt: 'Summarize my notes.', ...body });
  expect(res.status).toBe(200);
  return res.body.automation.automationId;
}

function finished(user: TestUser, runId: string): Promise<Run> {
  return eventually(async () => {
    const res = await ctx.h.http().get('/api/v1/automations/runs').query({ runId }).set(user.auth);
    return ['succeeded', 'failed', 'cancelled'].includes(res.body.run?.status) ? (res.body.run as Run) : undefined;
  });
}

const test_ = (user: TestUser, body: Record<string, unknown>) => ctx.h.http().post('/api/v1/automations/test').set(user.auth).send(body);

describe('automations: the collection contract', () => {
  describeCrudContract(
    {
      path: '/api/v1/automations',
      idField: 'automationId',
      one: 'automation',
      many: 'automations',
      create: (n) => ({ name: `Automation ${n}`, prompt: 'Summarize.', schedule: { cron: '0 9 * * *', timezone: 'Europe/Paris' } }),
      update: { name: 'changed', prompt: 'Other.', outputFormat: 'text' },
      invalidCreates: [
        {},
        { name: 'No prompt' },
        { name: '', prompt: 'p' },
        { name: 'n', prompt: 'p', schedule: { cron: '0 9 * * *' } },
        { name: 'n', prompt: 'p', schedule: { cron: '0 9 * * *', timezone: 'Mars/Olympus' } },
        { name: 'n', prompt: 'p', model: 'no-such-model' },
        { name: 'n', prompt: 'p', outputFormat: 'pdf' },
        { name: 'n', prompt: 'x'.repeat(20_001) },
        { name: 'n', prompt: 'p', skillIds: ['a', 'a'] },
      ],
      invalidUpdates: [
        { name: '' },
        { omitId: true },
        { enabled: 'no' },
        { model: 'no-such-model' },
        { schedule: { cron: '0 9 * * *', timezone: 'Nowhere/City' } },
      ],
    },
    () => ctx.h,
  );
});

describe('automations', () => {
  test('a schedule shows its next slot; an invalid cron expression is 400 invalid_cron and creates nothing', async () => {
    const id = await automation(ctx.alice, { schedule: { cron: '0 9 * * *', timezone: 'Asia/Tokyo' } });
    const read = await ctx.h.http().get('/api/v1/automations').query({ automationId: id }).set(ctx.alice.auth);
    const next = new Date(read.body.automation.nextRunAt);
    expect(next.getTime()).toBeGreaterThan(Date.now());
    expect(next.getUTCHours()).toBe(0); // 09:00 in Tokyo
    const disabled = await ctx.h.http().patch('/api/v1/automations').set(ctx.alice.auth).send({ automationId: id, enabled: false });
    expect(disabled.body.automation.nextRunAt).toBeNull();
    const before = await ctx.h.http().get('/api/v1/automations').query({ limit: 200 }).set(ctx.alice.auth);
    const bad = await ctx.h
      .http()
      .post('/api/v1/automations')
      .set(ctx.alice.auth)
      .send({ name: 'Bad', prompt: 'p', schedule: { cron: '61 * * * *', timezone: 'UTC' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'invalid_cron', details: [{ path: '/body/schedule/cron' }] });
    const six = await ctx.h
      .http()
      .post('/api/v1/automations')
      .set(ctx.alice.auth)
      .send({ name: 'Bad', prompt: 'p', schedule: { cron: '* * * * * *', timezone: 'UTC' } });
    expect(six.body.code).toBe('invalid_cron');
    const after = await ctx.h.http().get('/api/v1/automations').query({ limit: 200 }).set(ctx.alice.auth);
    expect(after.body.automations).toEqual(before.body.automations);
  });
});

describe('POST /api/v1/automations/test', () => {
  test('a valid draft: valid, with the next five slots', async () => {
    const res = await test_(ctx.alice, {
      name: 'Daily',
      prompt: 'Summarize.',
      schedule: { cron: '30 8 * * 1-5', timezone: 'America/New_York' },
    });
    expect(res.body).toMatchObject({ valid: true, errors: [], preview: null });
    expect(res.body.nextRuns).toHaveLength(5);
    for (const slot of res.body.nextRuns as number[]) {
      const local = new Date(slot).toLocaleString('en-US', {
        timeZone: 'America/New_York',
        weekday: 'short',
        hour: '2-digit',
        minute: '2-digit',
        hour12: false,
      });
      expect(local).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 08:30$/);
    }
    expect([...res.body.nextRuns].sort()).toEqual(res.body.nextRuns);
  });

  test('an invalid cron, an unknown time zone, another user’s project or skill, an unknown model: valid false with the field', async () => {
    const project = await ctx.h.http().post('/api/v1/projects').set(ctx.bob.auth).send({ name: 'Bob’s' });
    const skill = await ctx.h
      .http()
      .post('/api/v1/skills')
      .set(ctx.bob.auth)
      .send({ name: `Bob skill ${Date.now()}` });
    const res = await test_(ctx.alice, {
      name: 'Bad',
      prompt: 'p',
      schedule: { cron: '0 25 * * *', timezone: 'Mars/Olympus' },
      projectId: project.body.project.projectId,
      skillIds: [skill.body.skill.skillId],
      model: 'no-such-model',
      execute: true,
    });
    expect(res.status).toBe(200);
    expect(res.body.valid).toBe(false);
    expect(res.body.errors.map((e: { field: string; code: string }) => [e.field, e.code])).toEqual([
      ['/schedule/cron', 'invalid_cron'],
      ['/schedule/timezone', 'unknown_timezone'],
      ['/projectId', 'not_found'],
      ['/skillIds/0', 'not_found'],
      ['/model', 'not_found'],
    ]);
    expect(res.body).toMatchObject({ nextRuns: [], preview: null });
  });

  test('execute runs the prompt once as a dry run: a preview, nothing saved, no webhook', async () => {
    const user = await ctx.h.newUser('dry');
    await subscribe(ctx.h, user, `${servers.receiver.url}/dry`, ['automation.finished', 'automation.failed']);
    const skill = await ctx.h.http().post('/api/v1/skills').set(user.auth).send({ name: 'Terse', instructions: 'Be terse.' });
    const res = await test_(user, { name: 'Dry', prompt: 'Summarize my week.', skillIds: [skill.body.skill.skillId], execute: true });
    expect(res.body).toMatchObject({
      valid: true,
      preview: { content: '- Four notes reviewed.', mimeType: 'text/markdown', usage: { inputTokens: 10, outputTokens: 5 } },
    });
    const prompt = servers.model.requests.at(-1)!.body.messages;
    expect(prompt[0]!.content).toContain('Be terse.');
    expect(prompt.at(-1)).toEqual({ role: 'user', content: 'Summarize my week.' });
    expect((await ctx.h.http().get('/api/v1/automations').set(user.auth)).body.automations).toEqual([]);
    expect((await ctx.h.http().get('/api/v1/automations/runs').set(user.auth)).body.runs).toEqual([]);
    expect((await ctx.h.http().get('/api/v1/outputs').set(user.auth)).body.outputs).toEqual([]);
    await ctx.h.runtime.dispatcher.runOnce();
    expect(servers.receiver.received.filter((r) => r.path === '/hook/dry')).toEqual([]);

    servers.model.behaviour = () => ({ kind: 'reply', chunks: ['not json'] });
    const json = await test_(user, { name: 'Dry', prompt: 'List as JSON.', outputFormat: 'json', execute: true });
    expect(json.body).toMatchObject({ valid: false, errors: [{ field: '/outputFormat', code: 'invalid_output' }], preview: null });
  });

  test('bad input is a 400', async () => {
    for (const body of [
      {},
      { name: 'n' },
      { name: 'n', prompt: 'p', execute: 'yes' },
      { name: 'n', prompt: 'p', schedule: { cron: '* * * * *' } },
      { name: 'n', prompt: 'p', extra: 1 },
    ]) {
      expect((await test_(ctx.alice, body)).status).toBe(400);
    }
    expect((await ctx.h.http().post('/api/v1/automations/test').send({ name: 'n', prompt: 'p' })).status).toBe(401);
  });
});

describe('runs', () => {
  test('a run goes queued → running → succeeded, stores its output and emits automation.finished', async () => {
    const user = await ctx.h.newUser('runs');
    const { secret } = await subscribe(ctx.h, user, `${servers.receiver.url}/finished`, ['automation.finished']);
    const automationId = await automation(user, { name: 'Briefing' });
    const queued = await ctx.h.http().post('/api/v1/automations/run').set(user.auth).send({ automationId });
    expect(queued.status).toBe(200);
    expect(queued.body.run).toMatchObject({ automationId, status: 'queued', trigger: 'manual', attempt: 0, outputs: [] });
    const run = await finished(user, queued.body.run.runId);
    expect(run).toMatchObject({
      status: 'succeeded',
      attempt: 1,
      errorCode: null,
      usage: { inputTokens: 10, outputTokens: 5, costCents: 0.002 },
    });
    expect(run.outputs).toHaveLength(1);
    expect(run.outputs[0]!.mimeType).toBe('text/markdown');
    const content = await ctx.h
      .http()
      .get(`/api/v1/outputs/${run.outputs[0]!.outputId}/content`)
      .set(user.auth)
      .buffer(true)
      .parse(binaryBody);
    expect((content.body as Buffer).toString('utf8')).toBe('- Four notes reviewed.');
    const hook = await eventually(() => servers.receiver.received.find((r) => r.path === '/hook/finished'));
    expect(verify(secret, hook)).toMatchObject({
      type: 'automation.finished',
      data: { automationId, runId: run.runId, outputIds: [run.outputs[0]!.outputId] },
    });
  });

  test('a provider error fails the run and emits automation.failed, its reason without the address the provider gave', async () => {
    servers.model.behaviour = () => ({
      kind: 'error',
      status: 500,
      message: 'upstream overloaded at http://10.0.0.7:8000/v1 (10.0.0.7:8000)',
    });
    const user = await ctx.h.newUser('runfails');
    const { secret } = await subscribe(ctx.h, user, `${servers.receiver.url}/run-failed`, ['automation.failed']);
    const automationId = await automation(user);
    const queued = await ctx.h.http().post('/api/v1/automations/run').set(user.auth).send({ automationId });
    const run = await finished(user, queued.body.run.runId);
    const reason = 'The model provider answered 500: upstream overloaded at [address] ([address])';
    expect(run).toMatchObject({ status: 'failed', errorCode: 'model_provider_error', errorMessage: reason, outputs: [], usage: null });
    const hook = await eventually(() => servers.receiver.received.find((r) => r.path === '/hook/run-failed'));
    expect(hook.body).not.toContain('10.0.0.7');
    expect(verify(secret, hook)).toMatchObject({
      type: 'automation.failed',
      data: { automationId, runId: run.runId, errorCode: 'model_provider_error', error: reason },
    });
  });

  describe('with a run timeout of one second', () => {
    const timed = useHarnessWith(() => ({ ...env(), AUTOMATION_RUN_TIMEOUT_MS: '1000' }), 'carol');

    test('a run that outlasts the run timeout fails', async () => {
      servers.model.behaviour = () => ({ kind: 'hang' }); // never answers: only the timeout ends the run
      const created = await timed.h.http().post('/api/v1/automations').set(timed.carol.auth).send({ name: 'Slow', prompt: 'Think.' });
      const queued = await timed.h
        .http()
        .post('/api/v1/automations/run')
        .set(timed.carol.auth)
        .send({ automationId: created.body.automation.automationId });
      const run = await eventually(async () => {
        const res = await timed.h.http().get('/api/v1/automations/runs').query({ runId: queued.body.run.runId }).set(timed.carol.auth);
        return res.body.run.status === 'running' || res.body.run.status === 'queued' ? undefined : (res.body.run as Run);
      });
      expect(run).toMatchObject({ status: 'failed', attempt: 1, errorCode: 'model_provider_timeout' });
    });
  });

  describe('with a run timeout of twelve seconds', () => {
    const leased = useHarnessWith(() => ({ ...env(), AUTOMATION_RUN_TIMEOUT_MS: '12000' }), 'dan');

    test('a run that lasts keeps its claim by renewing its lease, and runs once only (attempt 1)', async () => {
      // The lease is the run timeout and 12 s; the runner renews it every quarter of that while the
      // run goes on. The model holds its answer until the renewal is seen in the database: without
      // renewal that never happens (and the run would be taken over once the lease ran out).
      let release = () => undefined as void;
      const held = new Promise<void>((resolve) => (release = resolve));
      servers.model.behaviour = () => ({ kind: 'hold', until: held, then: { kind: 'reply', chunks: ['Done.'] } });
      const asked = servers.model.requests.length;
      const created = await leased.h.http().post('/api/v1/automations').set(leased.dan.auth).send({ name: 'Long', prompt: 'Think.' });
      const queued = await leased.h
        .http()
        .post('/api/v1/automations/run')
        .set(leased.dan.auth)
        .send({ automationId: created.body.automation.automationId });
      const runId = queued.body.run.runId as string;
      await eventually(() => (servers.model.requests.length > asked ? true : undefined));
      const claim = () =>
        leased.h.runtime.database.db
          .selectFrom('automation_runs')
          .select(['lease_token', 'locked_until', 'attempt'])
          .where('id', '=', runId)
          .executeTakeFirstOrThrow();
      const claimed = await claim();
      expect(claimed.locked_until).not.toBeNull();
      const renewed = await eventually(async () => {
        const now = await claim();
        return (now.locked_until?.getTime() ?? 0) > claimed.locked_until!.getTime() ? now : undefined;
      }, 170_000);
      expect(renewed).toMatchObject({ lease_token: claimed.lease_token, attempt: 1 });
      release();
      const run = await eventually(async () => {
        const res = await leased.h.http().get('/api/v1/automations/runs').query({ runId }).set(leased.dan.auth);
        return ['succeeded', 'failed'].includes(res.body.run.status) ? (res.body.run as Run) : undefined;
      });
      expect(run).toMatchObject({ status: 'succeeded', attempt: 1 });
      expect(servers.model.requests.length - asked).toBe(1);
    }, 180_000);
  });

  test('a user has at most AUTOMATION_MAX_CONCURRENT_RUNS runs running at once', async () => {
    let release = () => undefined as void;
    const held = new Promise<void>((resolve) => (release = resolve));
    servers.model.behaviour = () => ({ kind: 'hold', until: held, then: { kind: 'reply', chunks: ['Done.'] } });
    const user = await ctx.h.newUser('busy');
    const automationId = await automation(user);
    for (let i = 0; i < 3; i += 1) await ctx.h.http().post('/api/v1/automations/run').set(user.auth).send({ automationId });
    const statuses = async () =>
      ((await ctx.h.http().get('/api/v1/automations/runs').query({ automationId }).set(user.auth)).body.runs as Run[])
        .map((r) => r.status)
        .sort();
    // The model answers nothing until two runs are running (the third waits its turn); then all
    // three finish. Sampled throughout: never more than two running.
    const running: number[] = [];
    const sample = async () => {
      const now = await statuses();
      running.push(now.filter((s) => s === 'running').length);
      return now;
    };
    await eventually(async () => {
      const now = await sample();
      return now.filter((s) => s === 'running').length === 2 ? true : undefined;
    });
    expect(await sample()).toEqual(['queued', 'running', 'running']);
    release();
    await eventually(async () => ((await sample()).every((s) => s === 'succeeded') ? true : undefined));
    expect(Math.max(...running)).toBe(2);
  });

  test('Idempotency-Key queues one run; another user’s automation is not found; bad input is a 400', async () => {
    const automationId = await automation(ctx.alice);
    const a = await ctx.h
      .http()
      .post('/api/v1/automations/run')
      .set(ctx.alice.auth)
      .set('Idempotency-Key', `run-${automationId}`)
      .send({ automationId });
    const b = await ctx.h
      .http()
      .post('/api/v1/automations/run')
      .set(ctx.alice.auth)
      .set('Idempotency-Key', `run-${automationId}`)
      .send({ automationId });
    expect({ status: b.status, body: b.body }).toMatchObject({ status: 200, body: { run: { runId: a.body.run.runId } } });
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect((await ctx.h.http().post('/api/v1/automations/run').set(ctx.bob.auth).send({ automationId })).status).toBe(404);
    for (const body of [{}, { automationId: '' }, { automationId, now: true }]) {
      expect((await ctx.h.http().post('/api/v1/automations/run').set(ctx.alice.auth).send(body)).status).toBe(400);
    }
    const runs = await ctx.h.http().get('/api/v1/automations/runs').query({ automationId }).set(ctx.alice.auth);
    expect(runs.body.runs).toHaveLength(1);
  });

  test('the run history filters by automation and status; another user’s runs are not found', async () => {
    const first = await automation(ctx.alice);
    const second = await automation(ctx.alice);
    const r1 = await ctx.h.http().post('/api/v1/automations/run').set(ctx.alice.auth).send({ automationId: first });
    await ctx.h.http().post('/api/v1/automations/run').set(ctx.alice.auth).send({ automationId: second });
    await finished(ctx.alice, r1.body.run.runId);
    const ofFirst = await ctx.h.http().get('/api/v1/automations/runs').query({ automationId: first }).set(ctx.alice.auth);
    expect(ofFirst.body.runs.map((r: Run) => r.runId)).toEqual([r1.body.run.runId]);
    const succeeded = await ctx.h
      .http()
      .get('/api/v1/automations/runs')
      .query({ automationId: first, status: 'succeeded' })
      .set(ctx.alice.auth);
    expect(succeeded.body.runs).toHaveLength(1);
    expect((await ctx.h.http().get('/api/v1/automations/runs').query({ runId: r1.body.run.runId }).set(ctx.bob.auth)).status).toBe(404);
    expect((await ctx.h.http().get('/api/v1/automations/runs').query({ automationId: first }).set(ctx.bob.auth)).status).toBe(404);
    for (const query of [{ status: 'done' }, { limit: 0 }, { cursor: '!!' }]) {
      expect((await ctx.h.http().get('/api/v1/automations/runs').query(query).set(ctx.alice.auth)).status).toBe(400);
    }
  });
});

describe('the scheduler', () => {
  test('a tick missed because the event loop was blocked prints nothing (no node-cron warning or stack)', async () => {
    const printed = (['log', 'info', 'debug', 'warn', 'error'] as const).map((method) =>
      jest.spyOn(console, method).mockImplementation(() => undefined),
    );
    const logged: Array<{ level: string; message: string }> = [];
    // Ticking every second, on the harness's database (the harness's own scheduler ticks yearly).
    const scheduler = new AutomationScheduler({
      db: ctx.h.runtime.database.db,
      capabilities: ctx.h.runtime.services.capabilities,
      tickCron: '* * * * * *',
      log: (level, message) => logged.push({ level, message }),
    });
    let ticks = 0;
    const tick = scheduler.tick.bind(scheduler);
    jest.spyOn(scheduler, 'tick').mockImplementation((...args) => {
      ticks += 1;
      return tick(...args);
    });
    try {
      scheduler.start();
      await eventually(() => (ticks > 0 ? true : undefined));
      // Blocks the event loop past two whole seconds: the slot due within them is late by more
      // than node-cron's tolerance (1 s), a "missed execution".
      const until = Math.floor(Date.now() / 1000) * 1000 + 3000;
      while (Date.now() < until) {
        // busy: nothing else runs
      }
      // Two ticks after the block: the late beat (which reports the missed slot) has been handled.
      const after = ticks;
      await eventually(() => (ticks >= after + 2 ? true : undefined));
    } finally {
      await scheduler.stop();
    }
    const calls = printed.flatMap((spy) => spy.mock.calls);
    for (const spy of printed) spy.mockRestore(); // (which also forgets the calls)
    expect(calls).toEqual([]);
    expect(logged.filter((entry) => entry.level === 'error')).toEqual([]);
  });

  test('fires each due slot once, and after downtime only the latest missed slot', async () => {
    const user = await ctx.h.newUser('sched');
    const automationId = await automation(user, { schedule: { cron: '*/5 * * * *', timezone: 'UTC' } });
    const read = await ctx.h.http().get('/api/v1/automations').query({ automationId }).set(user.auth);
    const first = read.body.automation.nextRunAt as number;
    const scheduler = ctx.h.runtime.scheduler;
    expect(await scheduler.tick(new Date(first - 1000))).toBe(0);
    expect(await scheduler.tick(new Date(first + 1000))).toBeGreaterThanOrEqual(1);
    await scheduler.tick(new Date(first + 2000)); // the same slot again: nothing
    await scheduler.tick(new Date(first + 61 * 60_000)); // an hour of missed slots: one run, for the latest
    const runs = await ctx.h.http().get('/api/v1/automations/runs').query({ automationId }).set(user.auth);
    const slots = runs.body.runs.map((r: { scheduledFor: number }) => r.scheduledFor).sort();
    expect(slots).toEqual([first, first + 60 * 60_000]);
    expect(runs.body.runs.every((r: { trigger: string }) => r.trigger === 'schedule')).toBe(true);
  });

  test('a disabled automation fires nothing', async () => {
    const user = await ctx.h.newUser('off');
    const automationId = await automation(user, { schedule: { cron: '* * * * *', timezone: 'UTC' }, enabled: false });
    await ctx.h.runtime.scheduler.tick(new Date(Date.now() + 10 * 60_000));
    expect((await ctx.h.http().get('/api/v1/automations/runs').query({ automationId }).set(user.auth)).body.runs).toEqual([]);
  });
});

describe('with the automations capability off', () => {
  const actor = { userId: 'system:test', requestId: null };
  afterEach(() => ctx.h.runtime.services.capabilities.update(actor, { automations: true }));

  test('every automation route answers the same 403; nothing is created, queued or fired', async () => {
    const user = await ctx.h.newUser('gated');
    const automationId = await automation(user, { schedule: { cron: '* * * * *', timezone: 'UTC' } });
    await ctx.h.runtime.services.capabilities.update(actor, { automations: false });
    expect((await ctx.h.http().get('/api/v1/capabilities').set(user.auth)).body.capabilities.automations).toBe(false);
    const calls = [
      ctx.h.http().get('/api/v1/automations'),
      ctx.h.http().get('/api/v1/automations').query({ automationId }),
      ctx.h.http().post('/api/v1/automations').send({ name: 'n', prompt: 'p' }),
      ctx.h.http().post('/api/v1/automations').send({ invalid: true }),
      ctx.h.http().patch('/api/v1/automations').send({ automationId, name: 'x' }),
      ctx.h.http().delete('/api/v1/automations').query({ automationId }),
      ctx.h.http().post('/api/v1/automations/test').send({ name: 'n', prompt: 'p' }),
      ctx.h.http().post('/api/v1/automations/run').send({ automationId }),
      ctx.h.http().get('/api/v1/automations/runs'),
    ];
    const bodies = [];
    for (const call of calls) {
      const res = await call.set(user.auth);
      expect(res.status).toBe(403);
      bodies.push(res.body);
    }
    expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
    expect(bodies[0]).toEqual({
      error: 'Automation scheduling is disabled for this deployment.',
      code: 'capability_disabled',
      capability: 'automations',
    });
    expect(await ctx.h.runtime.scheduler.tick(new Date(Date.now() + 10 * 60_000))).toBe(0);
    await ctx.h.runtime.services.capabilities.update(actor, { automations: true });
    const runs = await ctx.h.http().get('/api/v1/automations/runs').query({ automationId }).set(user.auth);
    expect(runs.body.runs).toEqual([]);
    expect((await ctx.h.http().get('/api/v1/automations').query({ automationId }).set(user.auth)).body.automation.name).not.toBe('x');
  });

  test('a queued run whose capability is switched off before it starts is cancelled', async () => {
    const user = await ctx.h.newUser('cancel');
    const automationId = await automation(user);
    await ctx.h.runtime.runner.stop();
    try {
      const queued = await ctx.h.http().post('/api/v1/automations/run').set(user.auth).send({ automationId });
      await ctx.h.runtime.services.capabilities.update(actor, { automations: false });
      ctx.h.runtime.runner.start();
      await ctx.h.runtime.runner.runOnce();
      await ctx.h.runtime.services.capabilities.update(actor, { automations: true });
      expect(await finished(user, queued.body.run.runId)).toMatchObject({ status: 'cancelled', errorCode: 'capability_disabled' });
    } finally {
      ctx.h.runtime.runner.start();
    }
  });
});
