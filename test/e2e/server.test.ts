import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadDevAuthMaterial, signDevToken } from '../../src/platform/tokens';
import { freePort, listening, productionEnv, root, start } from '../helpers/process';

// Each case starts the service from source (tsx) one or more times: on a loaded 2-core machine a
// start alone can take minutes. The cases wait for conditions; this only bounds them.
jest.setTimeout(600_000);

describe('the service process', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-e2e-'));
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test('starts on the embedded defaults, keeps data across a graceful restart', async () => {
    const port = String(await freePort());
    const base = `http://127.0.0.1:${port}`;
    const first = start({ DATA_DIR: dataDir, PORT: port });
    const firstStart = await listening(first);
    expect(firstStart.database).toBe('pglite');
    expect(first.output()).toContain('DEVELOPMENT MODE');
    expect((await fetch(`${base}/healthz`)).status).toBe(200);

    const token = await signDevToken(await loadDevAuthMaterial(dataDir), 'alice');
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const created = await fetch(`${base}/api/v1/projects`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: 'Survives restarts' }),
    });
    expect(created.status).toBe(200);
    const { project } = (await created.json()) as { project: { projectId: string } };

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.output()).toContain('"message":"stopped"');

    const second = start({ DATA_DIR: dataDir, PORT: port });
    await listening(second);
    try {
      const listed = await fetch(`${base}/api/v1/projects`, { headers });
      const body = (await listed.json()) as { projects: Array<{ projectId: string }> };
      expect(body.projects.map((p) => p.projectId)).toEqual([project.projectId]);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });

  test('make admin grants the first admin, refusing to open the embedded database under a running service', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-e2e-admin-'));
    const port = String(await freePort());
    const admin = (userId: string) =>
      new Promise<{ code: number | null; output: string }>((resolve) => {
        const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', userId, 'admin', ''], {
          cwd: root,
          env: { PATH: process.env.PATH ?? '', DATA_DIR: dir },
        });
        let output = '';
        child.stdout.on('data', (c: Buffer) => (output += c.toString()));
        child.stderr.on('data', (c: Buffer) => (output += c.toString()));
        child.on('exit', (code) => resolve({ code, output }));
      });
    try {
      const service = start({ DATA_DIR: dir, PORT: port });
      await listening(service);
      const refused = await admin('alice');
      expect(refused.code).toBe(1);
      expect(refused.output).toMatch(/in use by process/);
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);

      const granted = await admin('alice');
      expect(granted).toMatchObject({ code: 0, output: expect.stringContaining('granted admin to alice') });
      expect((await admin('alice')).output).toContain('alice already holds admin');

      const again = start({ DATA_DIR: dir, PORT: port });
      await listening(again);
      try {
        const token = await signDevToken(await loadDevAuthMaterial(dir), 'alice');
        const res = await fetch(`http://127.0.0.1:${port}/api/v1/admin/principals`, { headers: { authorization: `Bearer ${token}` } });
        const body = (await res.json()) as { principals: Array<{ userId: string; grantedBy: string }> };
        expect(body.principals).toEqual([expect.objectContaining({ userId: 'alice', grantedBy: 'system:script' })]);
      } finally {
        again.child.kill('SIGTERM');
        await again.exited;
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('on SIGTERM it keeps serving for the drain period with /readyz 503 draining; a second signal ends it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-e2e-drain-'));
    const port = String(await freePort());
    const base = `http://127.0.0.1:${port}`;
    // A drain far longer than the test: only the second signal can end it.
    const service = start({ DATA_DIR: dir, PORT: port, SHUTDOWN_DRAIN_MS: '600000' });
    try {
      await listening(service);
      const token = await signDevToken(await loadDevAuthMaterial(dir), 'alice');
      service.child.kill('SIGTERM');
      // Wait for the signal to be handled: the log says so.
      while (!service.output().includes('"message":"shutting down"')) await new Promise((r) => setTimeout(r, 100));
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ status: 'draining', checks: { draining: true } });
      const served = await fetch(`${base}/api/v1/projects`, { headers: { authorization: `Bearer ${token}` } });
      expect(served.status).toBe(200);
      expect(served.headers.get('connection')).toBe('close');

      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
      expect(service.output()).toContain('"message":"stopped"');
    } finally {
      service.child.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a bad setting stops the start with a clear message and exit code 1', async () => {
    const bad = start({ DATA_DIR: dataDir, PORT: 'eighty' });
    expect(await bad.exited).toBe(1);
    expect(bad.output()).toContain('PORT must be a whole number');
  });

  test('production refuses to start without an identity provider, a cookie secret and SECRETS_KEY', async () => {
    const prod = start({ DATA_DIR: dataDir, NODE_ENV: 'production' });
    expect(await prod.exited).toBe(1);
    expect(prod.output()).toMatch(/identity provider[\s\S]*COOKIE_SECRET/);
    expect(prod.output()).toContain('production needs SECRETS_KEY');
  });

  test('production without a model provider refuses to start, saying so; MODEL_PROVIDER=development is served only when chosen, and said', async () => {
    // Everything else production needs, so that the model provider is the one problem left.
    const production = productionEnv(fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-e2e-prod-')));
    try {
      const refused = start(production);
      expect(await refused.exited).toBe(1);
      expect(refused.output()).toContain('production needs a model provider: set MODEL_PROVIDER_BASE_URL');
      expect(refused.output()).not.toContain('production needs SECRETS_KEY');
      expect(refused.output()).not.toContain('"message":"listening"');

      const port = String(await freePort());
      const chosen = start({ ...production, PORT: port, MODEL_PROVIDER: 'development' });
      try {
        expect(await listening(chosen)).toMatchObject({ modelProvider: 'builtin-development' });
        expect(chosen.output()).toContain('MODEL_PROVIDER=development: serving the built-in development model, which is NOT an AI');
      } finally {
        chosen.child.kill('SIGTERM');
        expect(await chosen.exited).toBe(0);
      }
    } finally {
      fs.rmSync(production.DATA_DIR as string, { recursive: true, force: true });
    }
  });
});
