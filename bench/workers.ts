/**
 * B6 (part of `make bench`, on Postgres): the background workers.
 *   - webhook deliveries per second: 5,000 pending deliveries inserted at once for one
 *     subscription, delivered by one instance to a loopback receiver that answers 204;
 *   - automation slot claims: 10,000 schedules made due at once, claimed by three instances, each
 *     slot once (the seconds until all are claimed, and the claims per second).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { sql } from 'kysely';
import { openPostgres } from '../src/platform/db';
import { loadDevAuthMaterial, signDevToken } from '../src/platform/tokens';
import { port, serverCpu, spawnPinned, stop, waitReady } from './process';

const DELIVERIES = 5_000;
const AUTOMATIONS = 10_000;

async function until(done: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = performance.now();
  while (!(await done())) {
    if (performance.now() - started > timeoutMs) throw new Error(`not done within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 25));
  }
  return (performance.now() - started) / 1000;
}

async function deliveries(url: string, env: Record<string, string>): Promise<Array<[string, string]>> {
  let received = 0;
  let first = 0;
  let last = 0;
  const receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.headers['webhook-signature']) {
        received += 1;
        if (received === 1) first = performance.now();
        if (received === DELIVERIES) last = performance.now();
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const port = (receiver.address() as AddressInfo).port;
  const serviceEnv = { ...env, WEBHOOK_ALLOW_LOOPBACK: 'true', WEBHOOK_ALLOWED_PORTS: String(port) };
  const base = `http://127.0.0.1:${env.PORT}`;
  const service = spawnPinned(serverCpu, ['dist/src/server.js'], serviceEnv);
  const database = await openPostgres(url, { poolSize: 2 });
  try {
    await waitReady(`${base}/readyz`);
    const user = `bench-hooks-${Date.now()}`;
    const token = await signDevToken(await loadDevAuthMaterial(env.DATA_DIR as string), user);
    const created = await fetch(`${base}/api/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `http://127.0.0.1:${port}/hooks`, events: ['chat.completed'] }),
    });
    if (created.status !== 200) throw new Error(`webhook subscription: ${created.status} ${await created.text()}`);
    const { subscription } = (await created.json()) as { subscription: { subscriptionId: string } };
    // The events and their deliveries, as the service writes them, in one statement.
    await sql`
      with events as (
        insert into webhook_events (id, owner_user_id, type, body, created_at)
        select ${user} || '-' || g, ${user}, 'chat.completed',
               json_build_object('id', ${user} || '-' || g, 'type', 'chat.completed', 'createdAt', 0, 'data', json_build_object('n', g))::text, now()
        from generate_series(1, ${DELIVERIES}) as g
        returning id)
      insert into webhook_deliveries (id, subscription_id, event_id, owner_user_id, status, max_attempts, next_attempt_at, created_at, updated_at)
      select gen_random_uuid()::text, ${subscription.subscriptionId}, id, ${user}, 'pending', 8, now(), now(), now() from events`.execute(
      database.db,
    );
    const seconds = await until(async () => received >= DELIVERIES, 120_000);
    // The rate from the first delivery to the last: before the first, the workers wait for their
    // next poll (WEBHOOK_POLL_INTERVAL_MS), which the total includes.
    const rate = (DELIVERIES - 1) / ((last - first) / 1000);
    return [
      [
        `B6 webhook deliveries to a loopback receiver, ${DELIVERIES.toLocaleString('en')} pending, one instance (deliveries/s; goal ≥ 500)`,
        rate.toFixed(0),
      ],
      ['B6 the same, from the insert to the last delivery, with the first poll (s)', seconds.toFixed(2)],
    ];
  } finally {
    await stop(service);
    receiver.close();
    await database.close();
  }
}

async function automationClaims(url: string, env: Record<string, string>): Promise<Array<[string, string]>> {
  const base = Number(env.PORT);
  const instances = [0, 1, 2].map((i) => spawnPinned(serverCpu, ['dist/src/server.js'], { ...env, PORT: String(base + 10 + i) }));
  const database = await openPostgres(url, { poolSize: 2 });
  const owner = `bench-auto-${Date.now()}`;
  try {
    await Promise.all([0, 1, 2].map((i) => waitReady(`http://127.0.0.1:${base + 10 + i}/readyz`)));
    // Every minute, due since the last whole minute: one slot each, all due at once.
    await sql`
      insert into automations (id, owner_user_id, name, prompt, cron, timezone, enabled, output_format, next_run_at, created_at, updated_at)
      select ${owner} || '-' || g, ${owner} || '-' || (g % 100), 'Bench ' || g, 'Summarize.', '* * * * *', 'UTC', true, 'markdown',
             date_trunc('minute', now()), now(), now()
      from generate_series(1, ${AUTOMATIONS}) as g`.execute(database.db);
    const counts = async () =>
      (
        await sql<{ runs: number; automations: number; slots: number }>`
          select count(*)::int as runs, count(distinct automation_id)::int as automations,
                 count(distinct (automation_id, scheduled_for))::int as slots
          from automation_runs where owner_user_id like ${`${owner}-%`} and trigger = 'schedule'`.execute(database.db)
      ).rows[0] as { runs: number; automations: number; slots: number };
    const seconds = await until(async () => (await counts()).automations >= AUTOMATIONS, 120_000);
    const final = await counts();
    if (final.runs !== final.slots) throw new Error(`a slot was claimed twice: ${final.runs} runs for ${final.slots} slots`);
    return [
      [`B6 automation slots claimed by 3 instances, ${AUTOMATIONS.toLocaleString('en')} due at once (s; goal ≤ 60)`, seconds.toFixed(2)],
      ['B6 automation slot claims per second', (AUTOMATIONS / seconds).toFixed(0)],
      ['B6 slots claimed twice', String(final.runs - final.slots)],
    ];
  } finally {
    await Promise.all(instances.map(stop));
    await sql`delete from automation_runs where owner_user_id like ${`${owner}-%`}`.execute(database.db);
    await sql`delete from automations where owner_user_id like ${`${owner}-%`}`.execute(database.db);
    await database.close();
  }
}

export async function workersBench(env: Record<string, string>, parts = ['deliveries', 'automations']): Promise<Array<[string, string]>> {
  const url = env.DATABASE_URL as string;
  return [
    ...(parts.includes('deliveries') ? await deliveries(url, env) : []),
    ...(parts.includes('automations') ? await automationClaims(url, env) : []),
  ];
}

if (require.main === module) {
  const dataDir = path.join(process.env.TMPDIR ?? '/tmp', `aiws-bench-workers-${Date.now()}`);
  const env = {
    DATA_DIR: dataDir,
    PORT: port(5),
    LOG_LEVEL: 'warn',
    NODE_ENV: 'development',
    DATABASE_URL: process.env.DATABASE_URL as string,
  };
  workersBench(env, process.argv.length > 2 ? process.argv.slice(2) : undefined).then((rows) => {
    for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  });
}
