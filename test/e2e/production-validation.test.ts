import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, listening, productionEnv, root, start } from '../helpers/process';

// The built service is started once (make build first, which is quick when dist/ is current).
jest.setTimeout(600_000);

/** Every file under src/, as text. */
function sources(dir = path.join(root, 'src')): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) =>
      entry.isDirectory() ? sources(path.join(dir, entry.name)) : [fs.readFileSync(path.join(dir, entry.name), 'utf8')],
    );
}

describe('the built service in production mode', () => {
  test('express-openapi-validator answers an invalid request, and the service has no validator of its own', async () => {
    execFileSync('make', ['-s', 'build'], { cwd: root, stdio: 'ignore' });
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-e2e-validation-'));
    const port = String(await freePort());
    const service = start({ ...productionEnv(dataDir), PORT: port, HOST: '127.0.0.1', MODEL_PROVIDER: 'development' }, { built: true });
    try {
      const started = await listening(service);
      expect(started).toMatchObject({ node: process.version });
      expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(24);
      const base = `http://127.0.0.1:${port}`;
      // An operation that needs no credentials, asked with a parameter the document does not have.
      const unknown = await fetch(`${base}/api/v1/discovery?verbose=1`);
      expect(unknown.status).toBe(400);
      expect(await unknown.json()).toMatchObject({
        code: 'invalid_request',
        details: [{ path: '/query/verbose', message: "Unknown query parameter 'verbose'" }],
      });
      expect((await fetch(`${base}/api/v1/discovery`)).status).toBe(200);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
    // The message is the library's: nothing in src/ writes it.
    expect(sources().filter((source) => source.includes('Unknown query parameter'))).toEqual([]);
  });
});
