import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';

export const root = path.resolve(__dirname, '../..');

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface Running {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * Starts src/server.ts as its own process with only the given environment (plus PATH); with
 * `built`, the service as `make run` starts it (dist/, which the caller builds first).
 */
export function start(env: Record<string, string>, { built = false } = {}): Running {
  const child = spawn(process.execPath, built ? ['dist/src/server.js'] : ['--import', 'tsx', 'src/server.ts'], {
    cwd: root,
    // No drain period unless a test asks for one: a stop is then as quick as before it existed.
    env: { PATH: process.env.PATH ?? '', SHUTDOWN_DRAIN_MS: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Waits until the process logs that it listens, or fails if it exits first (the test's timeout bounds the wait). */
export async function listening(running: Running): Promise<Record<string, unknown>> {
  for (;;) {
    const line = running
      .output()
      .split('\n')
      .find((l) => l.includes('"message":"listening"'));
    if (line) return JSON.parse(line) as Record<string, unknown>;
    if (running.child.exitCode !== null) throw new Error(`server exited: ${running.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Everything production needs to start but a model provider: an identity provider (not reached at start), secrets. */
export function productionEnv(dataDir: string): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    NODE_ENV: 'production',
    AUTH_JWKS_URL: 'https://idp.example.com/.well-known/jwks.json',
    AUTH_ISSUER: 'https://idp.example.com/',
    AUTH_AUDIENCE: 'ai-workspace',
    COOKIE_SECRET: randomBytes(32).toString('hex'),
    SECRETS_KEY: `k1:${randomBytes(32).toString('base64')}`,
  };
}
