import { AgentEnvironmentService } from '../../src/areas/agents/service';
import { type TestUser, useHarnessWith } from '../helpers/harness';

const ctx = useHarnessWith(() => ({ AGENT_OFFLINE_AFTER_MS: '1000' }), 'alice', 'bob');

/** The service as it will be `ms` from now (leases and expiries are decided by its clock). */
const later = (ms: number) =>
  new AgentEnvironmentService(ctx.h.runtime.database.db, ctx.h.runtime.config.agents, () => new Date(Date.now() + ms));

interface Registered {
  environmentId: string;
  credential: string;
}

const base = '/api/v1/agent-environments';
async function register(user: TestUser, body: Record<string, unknown> = {}): Promise<Registered> {
  const res = await ctx.h
    .http()
    .post(base)
    .set(user.auth)
    .send({ name: 'Laptop', platform: 'linux', protocolVersion: 1, ...body });
  expect(res.status).toBe(200);
  return { environmentId: res.body.environment.environmentId, credential: res.body.credential };
}
const heartbeat = (user: TestUser, env: Registered, body: Record<string, unknown> = {}) =>
  ctx.h.http().post(`${base}/${env.environmentId}/heartbeat`).set(user.auth).set('Environment-Credential', env.credential).send(body);
const enqueue = (user: TestUser, env: Registered, body: Record<string, unknown>) =>
  ctx.h.http().post(`${base}/${env.environmentId}/commands`).set(user.auth).send(body);
const ack = (user: TestUser, env: Registered, commandId: string, body: Record<string, unknown> = {}) =>
  ctx.h
    .http()
    .post(`${base}/${env.environmentId}/commands/${commandId}/ack`)
    .set(user.auth)
    .set('Environment-Credential', env.credential)
    .send({ protocolVersion: 1, commandId, environmentId: env.environmentId, accepted: true, ...body });
const grant = (user: TestUser, env: Registered, filesystemGrant: unknown) =>
  ctx.h.http().patch(`${base}/${env.environmentId}/roots`).set(user.auth).send({ filesystemGrant });
const commandsOf = async (user: TestUser, env: Registered, query: Record<string, string> = {}) =>
  (await ctx.h.http().get(`${base}/${env.environmentId}/commands`).query(query).set(user.auth).expect(200)).body.commands as Array<
    Record<string, unknown>
  >;

describe('registration', () => {
  test('returns the environment (offline, no grant) and its credential once; list and read are the owner’s', async () => {
    const res = await ctx.h.http().post(base).set(ctx.alice.auth).send({ name: 'Workstation', platform: 'macos', protocolVersion: 1 });
    expect(res.status).toBe(200);
    expect(res.body.credential).toMatch(/^aenv_[A-Za-z0-9_-]{43}$/);
    expect(res.body.environment).toEqual({
      environmentId: expect.any(String),
      name: 'Workstation',
      platform: 'macos',
      protocolVersion: 1,
      status: 'offline',
      agentVersion: null,
      reportedStatus: null,
      lastHeartbeatAt: null,
      pendingCommands: 0,
      createdAt: expect.any(Number),
      updatedAt: expect.any(Number),
    });
    const id = res.body.environment.environmentId;
    const read = await ctx.h.http().get(base).query({ environmentId: id }).set(ctx.alice.auth).expect(200);
    expect(read.body.environment).toEqual(res.body.environment);
    expect(JSON.stringify(read.body)).not.toContain(res.body.credential);
    const list = await ctx.h.http().get(base).set(ctx.alice.auth).expect(200);
    expect(list.body.environments.map((e: { environmentId: string }) => e.environmentId)).toContain(id);
    expect((await ctx.h.http().get(base).query({ environmentId: id }).set(ctx.bob.auth)).status).toBe(404);
    expect(
      (await ctx.h.http().get(base).set(ctx.bob.auth).expect(200)).body.environments.map((e: { environmentId: string }) => e.environmentId),
    ).not.toContain(id);
  });

  test('bad registrations are 400, an unsupported protocol precisely', async () => {
    const protocol = await ctx.h.http().post(base).set(ctx.alice.auth).send({ name: 'X', platform: 'linux', protocolVersion: 2 });
    expect(protocol.status).toBe(400);
    expect(protocol.body).toMatchObject({ code: 'unsupported_protocol_version', supported: [1] });
    for (const body of [
      { platform: 'linux', protocolVersion: 1 },
      { name: 'X', platform: 'beos', protocolVersion: 1 },
      { name: '', platform: 'linux', protocolVersion: 1 },
      { name: 'X', platform: 'linux', protocolVersion: '1' },
      { name: 'X', platform: 'linux', protocolVersion: 1, owner: 'bob' },
    ]) {
      const res = await ctx.h.http().post(base).set(ctx.alice.auth).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
  });

  test('delete removes the environment and its commands; its credential stops working', async () => {
    const env = await register(ctx.alice);
    await enqueue(ctx.alice, env, { type: 'reconnect' }).expect(200);
    expect((await ctx.h.http().delete(base).query({ environmentId: env.environmentId }).set(ctx.bob.auth)).status).toBe(404);
    await ctx.h
      .http()
      .delete(base)
      .query({ environmentId: env.environmentId })
      .set(ctx.alice.auth)
      .expect(200, { environmentId: env.environmentId, deleted: true });
    expect((await heartbeat(ctx.alice, env)).status).toBe(404);
    expect((await ctx.h.http().delete(base).set(ctx.alice.auth).send({})).status).toBe(400);
  });
});

describe('filesystem grant', () => {
  test.each([
    ['empty roots', { mode: 'selected_roots', roots: [] }, '/body/filesystemGrant/roots', 'must NOT have fewer than 1 items'],
    [
      '101 roots',
      { mode: 'selected_roots', roots: Array.from({ length: 101 }, (_, i) => `/r${i}`) },
      '/body/filesystemGrant/roots',
      'must NOT have more than 100 items',
    ],
    [
      'an empty string',
      { mode: 'selected_roots', roots: ['/ok', ''] },
      '/body/filesystemGrant/roots/1',
      'must NOT have fewer than 1 characters',
    ],
    ['an extra property', { mode: 'all_user_files', extra: true }, '/body/filesystemGrant/extra', 'must NOT have additional properties'],
    ['an unknown mode', { mode: 'everything' }, '/body/filesystemGrant', 'value of tag "mode" must be in oneOf'],
    [
      'both shapes mixed',
      { mode: 'all_user_files', roots: ['/home'] },
      '/body/filesystemGrant/roots',
      'must NOT have additional properties',
    ],
    ['roots missing', { mode: 'selected_roots' }, '/body/filesystemGrant/roots', "must have required property 'roots'"],
    ['mode missing', { roots: ['/home'] }, '/body/filesystemGrant', 'tag "mode" must be string'],
    ['not an object', 'all_user_files', '/body/filesystemGrant', 'must be object'],
  ])('%s → 400 with one precise problem, nothing changed', async (_name, filesystemGrant, path, message) => {
    const env = await register(ctx.alice);
    await grant(ctx.alice, env, { mode: 'all_user_files' }).expect(200);
    const res = await grant(ctx.alice, env, filesystemGrant);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'invalid_request', details: [{ path, message }] });
    expect(res.body.details).toHaveLength(1);
    const read = await ctx.h.http().get(base).query({ environmentId: env.environmentId }).set(ctx.alice.auth).expect(200);
    expect(read.body.environment.filesystemGrant).toEqual({ mode: 'all_user_files' });
  });

  test('without filesystemGrant, or with another property, the body is 400', async () => {
    const env = await register(ctx.alice);
    for (const body of [{}, { filesystemGrant: { mode: 'all_user_files' }, other: 1 }]) {
      const res = await ctx.h.http().patch(`${base}/${env.environmentId}/roots`).set(ctx.alice.auth).send(body);
      expect(res.status).toBe(400);
    }
  });

  test('roots are normalized; relative paths, .. segments and duplicates are refused with the root named', async () => {
    const env = await register(ctx.alice);
    const ok = await grant(ctx.alice, env, { mode: 'selected_roots', roots: ['/home/ada/projects/', '/srv//data/./x'] });
    expect(ok.status).toBe(200);
    expect(ok.body.environment.filesystemGrant).toEqual({ mode: 'selected_roots', roots: ['/home/ada/projects', '/srv/data/x'] });
    const all = await grant(ctx.alice, env, { mode: 'all_user_files' });
    expect(all.body.environment.filesystemGrant).toEqual({ mode: 'all_user_files' });
    const bad = await grant(ctx.alice, env, { mode: 'selected_roots', roots: ['/ok', 'relative/dir', '/a/../etc', '/ok/'] });
    expect(bad.status).toBe(400);
    expect(bad.body.details).toEqual([
      { path: '/body/filesystemGrant/roots/1', message: 'must be an absolute path such as /home/ada' },
      { path: '/body/filesystemGrant/roots/2', message: 'must not contain .. segments' },
      { path: '/body/filesystemGrant/roots/3', message: 'is the same path as roots/0 (/ok)' },
    ]);
    const windows = await register(ctx.alice, { platform: 'windows' });
    const win = await grant(ctx.alice, windows, { mode: 'selected_roots', roots: ['c:/Users/Ada/', 'D:\\data'] });
    expect(win.body.environment.filesystemGrant.roots).toEqual(['C:\\Users\\Ada', 'D:\\data']);
    expect((await grant(ctx.alice, windows, { mode: 'selected_roots', roots: ['/home/ada'] })).status).toBe(400);
  });
});

describe('commands', () => {
  test('enqueue → heartbeat claims → ack accepted; the same ack again is 200 and changes nothing; a reject records its error', async () => {
    const env = await register(ctx.alice);
    const first = await enqueue(ctx.alice, env, { type: 'prompt', payload: { prompt: 'Run the tests' } });
    expect(first.status).toBe(200);
    expect(first.body.command).toMatchObject({
      type: 'prompt',
      status: 'queued',
      deliveries: 0,
      leaseExpiresAt: null,
      payload: { prompt: 'Run the tests' },
    });
    const second = (await enqueue(ctx.alice, env, { type: 'cancel' }).expect(200)).body.command;

    const beat = await heartbeat(ctx.alice, env, {
      agentVersion: '0.9.2',
      status: 'busy',
      userId: ctx.alice.userId,
      accessToken: 'ignored',
    });
    expect(beat.status).toBe(200);
    expect(beat.body.environment).toMatchObject({ status: 'online', agentVersion: '0.9.2', reportedStatus: 'busy', pendingCommands: 2 });
    expect(beat.body.commands.map((c: { commandId: string }) => c.commandId)).toEqual([first.body.command.commandId, second.commandId]);
    expect(beat.body.commands[0]).toMatchObject({ status: 'claimed', deliveries: 1, leaseExpiresAt: expect.any(Number) });

    const accepted = await ack(ctx.alice, env, first.body.command.commandId);
    expect(accepted.status).toBe(200);
    expect(accepted.body.command).toMatchObject({
      status: 'accepted',
      leaseExpiresAt: null,
      acknowledgedAt: expect.any(Number),
      errorCode: null,
    });
    const again = await ack(ctx.alice, env, first.body.command.commandId);
    expect(again.status).toBe(200);
    expect(again.body.command).toEqual(accepted.body.command);
    const flipped = await ack(ctx.alice, env, first.body.command.commandId, { accepted: false });
    expect(flipped.status).toBe(409);
    expect(flipped.body).toMatchObject({ code: 'command_not_claimed', status: 'accepted' });

    const rejected = await ack(ctx.alice, env, second.commandId, {
      accepted: false,
      errorCode: 'busy',
      errorMessage: 'Another prompt is running.',
    });
    expect(rejected.body.command).toMatchObject({ status: 'rejected', errorCode: 'busy', errorMessage: 'Another prompt is running.' });
    expect(
      (await ack(ctx.alice, env, second.commandId, { accepted: false, errorCode: 'busy', errorMessage: 'Another prompt is running.' }))
        .status,
    ).toBe(200);
    expect((await commandsOf(ctx.alice, env, { status: 'rejected' })).map((c) => c.commandId)).toEqual([second.commandId]);
    const one = await ctx.h
      .http()
      .get(`${base}/${env.environmentId}/commands`)
      .query({ commandId: second.commandId })
      .set(ctx.alice.auth)
      .expect(200);
    expect(one.body.command).toEqual(rejected.body.command);
  });

  test('a lapsed lease returns the command to the queue with the same commandId', async () => {
    const env = await register(ctx.alice);
    const command = (await enqueue(ctx.alice, env, { type: 'start' }).expect(200)).body.command;
    expect((await heartbeat(ctx.alice, env).expect(200)).body.commands.map((c: { commandId: string }) => c.commandId)).toEqual([
      command.commandId,
    ]);
    // Within the lease a heartbeat gets nothing more.
    expect((await heartbeat(ctx.alice, env).expect(200)).body.commands).toEqual([]);
    // A minute and a second later (the default lease is a minute) the claim has lapsed.
    const lapsed = ctx.h.runtime.config.agents.commandLeaseMs + 1000;
    expect(await later(lapsed).command(ctx.alice.userId, env.environmentId, command.commandId)).toMatchObject({
      id: command.commandId,
      status: 'queued',
    });
    const redelivered = await later(lapsed).heartbeat(ctx.alice.userId, env.environmentId, env.credential, {});
    expect(redelivered.commands).toEqual([expect.objectContaining({ id: command.commandId, status: 'claimed', deliveries: 2 })]);
    await ack(ctx.alice, env, command.commandId).expect(200);
  });

  test('acks that do not fit are refused precisely and change nothing', async () => {
    const env = await register(ctx.alice);
    const queued = (await enqueue(ctx.alice, env, { type: 'prompt', payload: {} }).expect(200)).body.command;
    const notClaimed = await ack(ctx.alice, env, queued.commandId);
    expect(notClaimed.status).toBe(409);
    expect(notClaimed.body).toMatchObject({ code: 'command_not_claimed', status: 'queued' });
    await heartbeat(ctx.alice, env).expect(200);
    const mismatch = await ack(ctx.alice, env, queued.commandId, { commandId: 'another', environmentId: 'elsewhere' });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body).toMatchObject({
      code: 'command_id_mismatch',
      details: [{ path: '/body/commandId' }, { path: '/body/environmentId' }],
    });
    const protocol = await ack(ctx.alice, env, queued.commandId, { protocolVersion: 7 });
    expect(protocol.status).toBe(400);
    expect(protocol.body.code).toBe('unsupported_protocol_version');
    const wrong = await ack({ ...ctx.alice }, { ...env, credential: 'aenv_wrong' }, queued.commandId);
    expect(wrong.status).toBe(403);
    expect(wrong.body.code).toBe('invalid_environment_credential');
    const noHeader = await ctx.h
      .http()
      .post(`${base}/${env.environmentId}/commands/${queued.commandId}/ack`)
      .set(ctx.alice.auth)
      .send({ protocolVersion: 1, commandId: queued.commandId, environmentId: env.environmentId, accepted: true });
    expect(noHeader.status).toBe(400);
    expect((await ack(ctx.alice, env, queued.commandId, { accepted: 'yes' })).status).toBe(400);
    expect((await ack(ctx.alice, env, 'no-such-command')).status).toBe(404);
    expect((await commandsOf(ctx.alice, env))[0]).toMatchObject({ status: 'claimed', acknowledgedAt: null });
  });

  test('a heartbeat claims at most 50, and concurrent heartbeats never claim one command twice', async () => {
    const env = await register(ctx.alice);
    for (let i = 0; i < 55; i += 1) await enqueue(ctx.alice, env, { type: 'prompt', payload: { n: i } }).expect(200);
    const [a, b] = await Promise.all([heartbeat(ctx.alice, env), heartbeat(ctx.alice, env)]);
    const ids = [...a.body.commands, ...b.body.commands].map((c: { commandId: string }) => c.commandId);
    expect(Math.max(a.body.commands.length, b.body.commands.length)).toBe(50);
    expect(ids).toHaveLength(55);
    expect(new Set(ids).size).toBe(55);
  });

  test('commands past their expiry are expired and cannot be acknowledged', async () => {
    const env = await register(ctx.alice);
    const command = (await enqueue(ctx.alice, env, { type: 'shutdown', ttlSeconds: 10 }).expect(200)).body.command;
    await heartbeat(ctx.alice, env).expect(200);
    expect((await later(11_000).command(ctx.alice.userId, env.environmentId, command.commandId)).status).toBe('expired');
    const res = await ack(ctx.alice, env, command.commandId);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'command_not_claimed', status: 'expired' });
  });

  test('paths in a payload must be inside the grant; bad paths and bad commands are 400; large payloads 413', async () => {
    const env = await register(ctx.alice);
    const none = await enqueue(ctx.alice, env, { type: 'start', payload: { cwd: '/home/ada' } });
    expect(none.status).toBe(403);
    expect(none.body).toMatchObject({ code: 'path_outside_grant', details: [{ path: '/body/payload/cwd' }] });
    await grant(ctx.alice, env, { mode: 'selected_roots', roots: ['/home/ada/projects'] }).expect(200);
    await enqueue(ctx.alice, env, {
      type: 'start',
      payload: { cwd: '/home/ada/projects/app', paths: ['/home/ada/projects', '/home/ada/projects/a//b/'] },
    }).expect(200);
    const outside = await enqueue(ctx.alice, env, {
      type: 'start',
      payload: { cwd: '/home/ada/projectsX', paths: ['/home/ada/projects/ok', '/etc'] },
    });
    expect(outside.status).toBe(403);
    expect(outside.body.details.map((d: { path: string }) => d.path)).toEqual(['/body/payload/cwd', '/body/payload/paths/1']);
    for (const payload of [{ cwd: 'relative' }, { path: '/home/ada/projects/../../etc' }, { paths: '/home/ada/projects' }, { root: 42 }]) {
      const res = await enqueue(ctx.alice, env, { type: 'start', payload });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    for (const body of [
      { type: 'reboot' },
      {},
      { type: 'start', payload: [] },
      { type: 'start', ttlSeconds: 5 },
      { type: 'start', extra: 1 },
    ]) {
      const res = await enqueue(ctx.alice, env, body);
      expect(res.status).toBe(400);
    }
    const large = await enqueue(ctx.alice, env, { type: 'prompt', payload: { prompt: 'x'.repeat(130 * 1024) } });
    expect(large.status).toBe(413);
    await grant(ctx.alice, env, { mode: 'all_user_files' }).expect(200);
    await enqueue(ctx.alice, env, { type: 'start', payload: { cwd: '/etc' } }).expect(200);
    // Every refused enqueue queued nothing.
    expect(await commandsOf(ctx.alice, env)).toHaveLength(2);
  });

  test('an Idempotency-Key queues one command', async () => {
    const env = await register(ctx.alice);
    const send = () =>
      ctx.h
        .http()
        .post(`${base}/${env.environmentId}/commands`)
        .set(ctx.alice.auth)
        .set('Idempotency-Key', `k-${env.environmentId}`)
        .send({ type: 'reconnect' });
    const [a, b] = [await send(), await send()];
    expect(b.body).toEqual(a.body);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(await commandsOf(ctx.alice, env)).toHaveLength(1);
  });

  test('an environment goes offline when heartbeats stop', async () => {
    const env = await register(ctx.alice);
    expect((await heartbeat(ctx.alice, env).expect(200)).body.environment.status).toBe('online');
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const read = await ctx.h.http().get(base).query({ environmentId: env.environmentId }).set(ctx.alice.auth).expect(200);
    expect(read.body.environment.status).toBe('offline');
  });
});

describe('another user', () => {
  test('cannot read, heartbeat, enqueue, list, ack, change roots or delete your environment (404), and nothing changes', async () => {
    const env = await register(ctx.alice);
    const command = (await enqueue(ctx.alice, env, { type: 'prompt', payload: {} }).expect(200)).body.command;
    await heartbeat(ctx.alice, env).expect(200);
    const bob = ctx.bob;
    const attempts = [
      heartbeat(bob, env),
      enqueue(bob, env, { type: 'start' }),
      ctx.h.http().get(`${base}/${env.environmentId}/commands`).set(bob.auth),
      ctx.h.http().get(`${base}/${env.environmentId}/commands`).query({ commandId: command.commandId }).set(bob.auth),
      ack(bob, env, command.commandId),
      grant(bob, env, { mode: 'all_user_files' }),
      ctx.h.http().delete(base).query({ environmentId: env.environmentId }).set(bob.auth),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    const commands = await commandsOf(ctx.alice, env);
    expect(commands).toEqual([expect.objectContaining({ commandId: command.commandId, status: 'claimed', deliveries: 1 })]);
    const read = await ctx.h.http().get(base).query({ environmentId: env.environmentId }).set(ctx.alice.auth).expect(200);
    expect(read.body.environment.filesystemGrant).toBeUndefined();
    // A body naming another user is refused before anything else.
    expect((await heartbeat(ctx.alice, env, { userId: bob.userId })).status).toBe(403);
  });
});
