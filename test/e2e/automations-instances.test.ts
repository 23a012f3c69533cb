import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { anotherInstance, startHarness } from '../helpers/harness';
import { type FakeModelServer, startFakeModel } from '../helpers/openai-server';
import { freePort, listening, start } from '../helpers/process';
import { eventually, type Receiver, startReceiver, subscribe, verify } from '../helpers/receiver';

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

describe('automations across instances', () => {
  test('three instances ticking through ten simulated minutes make exactly ten runs', async () => {
    // The tests are the clock: node-cron's own tick (yearly here) and the run workers stay idle.
    const env = { AUTOMATION_TICK_CRON: '0 0 0 1 1 *', AUTOMATION_POLL_INTERVAL_MS: '60000' };
    const a = await startHarness(env);
    const others = [await anotherInstance(a, env), await anotherInstance(a, env)];
    try {
      const user = await a.newUser('every-minute');
      const created = await a
        .http()
        .post('/api/v1/automations')
        .set(user.auth)
        .send({ name: 'Every minute', prompt: 'Tick.', schedule: { cron: '* * * * *', timezone: 'UTC' } });
      const first = created.body.automation.nextRunAt as number;
      const schedulers = [a.runtime.scheduler, ...others.map((o) => o.scheduler)];
      let queued = 0;
      for (let minute = 0; minute < 10; minute += 1) {
        const now = new Date(first + minute * 60_000 + 5_000);
        const counts = await Promise.all(schedulers.map((s) => s.tick(now)));
        queued += counts.reduce((x, y) => x + y, 0);
      }
      const runs = await sql<{ scheduled_for: Date }>`
        select scheduled_for from automation_runs where automation_id = ${created.body.automation.automationId} order by scheduled_for`.execute(
        a.runtime.database.db,
      );
      expect(queued).toBe(10);
      expect(runs.rows.map((r) => r.scheduled_for.getTime())).toEqual(Array.from({ length: 10 }, (_, m) => first + m * 60_000));
    } finally {
      for (const other of others) await other.close();
      await a.close();
    }
  }, 300_000);

  describe('a run whose instance is killed', () => {
    let model: FakeModelServer;
    let receiver: Receiver;
    beforeAll(async () => {
      model = await startFakeModel((n) => (n === 0 ? { kind: 'hang' } : { kind: 'reply', chunks: ['Recovered.'] }));
      receiver = await startReceiver();
    });
    afterAll(async () => {
      await model.close();
      await receiver.close();
    });

    (onPostgres ? test : test.skip)(
      'is recovered by another instance after its lease and finishes once',
      async () => {
        const env = {
          MODEL_PROVIDER_BASE_URL: model.baseUrl,
          MODEL_PROVIDER_MODELS: 'test-model',
          AUTOMATION_RUN_TIMEOUT_MS: '5000',
          AUTOMATION_POLL_INTERVAL_MS: '20',
          AUTOMATION_TICK_CRON: '0 0 0 1 1 *',
          WEBHOOK_ALLOW_LOOPBACK: 'true',
          WEBHOOK_POLL_INTERVAL_MS: '20',
          WEBHOOK_SECRETS_KEY: 'a-test-key-for-sealing-webhook-secrets-002',
        };
        const survivor = await startHarness(env);
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-e2e-automations-'));
        await survivor.runtime.runner.stop(); // only the doomed instance may start the run
        const doomed = start({
          ...env,
          DATABASE_URL: survivor.runtime.config.databaseUrl as string,
          DATA_DIR: dataDir,
          PORT: String(await freePort()),
        });
        try {
          await listening(doomed);
          const user = await survivor.newUser('killed-run');
          const { secret } = await subscribe(survivor, user, receiver.url, ['automation.finished', 'automation.failed']);
          const created = await survivor
            .http()
            .post('/api/v1/automations')
            .set(user.auth)
            .send({ name: 'Long one', prompt: 'Think hard.' });
          const automationId = created.body.automation.automationId;
          const queued = await survivor.http().post('/api/v1/automations/run').set(user.auth).send({ automationId });

          await eventually(() => (model.requests.length === 1 ? true : undefined));
          doomed.child.kill('SIGKILL');
          await doomed.exited;
          survivor.runtime.runner.start();

          const run = await eventually(async () => {
            const res = await survivor.http().get('/api/v1/automations/runs').query({ runId: queued.body.run.runId }).set(user.auth);
            return res.body.run.status === 'succeeded' ? res.body.run : undefined;
          });
          expect(run).toMatchObject({ attempt: 2, errorCode: null });
          expect(run.outputs).toHaveLength(1);
          expect(model.requests).toHaveLength(2);
          const outputs = await survivor.http().get('/api/v1/outputs').query({ automationId }).set(user.auth);
          expect(outputs.body.outputs).toHaveLength(1);
          await eventually(() => (receiver.received.length >= 1 ? true : undefined));
          await survivor.runtime.dispatcher.runOnce();
          expect(receiver.received.map((r) => verify(secret, r).type)).toEqual(['automation.finished']);
        } finally {
          if (doomed.child.exitCode === null && doomed.child.signalCode === null) doomed.child.kill('SIGKILL');
          await survivor.close();
          fs.rmSync(dataDir, { recursive: true, force: true });
        }
      },
      120_000,
    );
  });
});
