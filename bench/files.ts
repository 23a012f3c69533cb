/**
 * B4 (part of `make bench`): a 256 MiB file uploaded and downloaded through the service (streamed
 * over HTTP: the upload URL, then the content route) against the raw store doing the same, on the
 * local directory store (the raw side: file streams) and on an S3 server (s3rver in its own process;
 * the raw side: the service's S3 adapter called from the bench), with the service's RSS before and
 * at its peak.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { loadConfig } from '../src/config';
import { S3ObjectStore } from '../src/platform/storage/s3';
import { loadDevAuthMaterial, signDevToken } from '../src/platform/tokens';
import { clientCpu, peakRss, rssMiB, serverCpu, spawnPinned, stop, waitReady } from './process';

const SIZE = 256 * 1024 * 1024;
const MiB = 1024 * 1024;
const BLOCK = Buffer.alloc(MiB, 7);

/** SIZE bytes in 1 MiB blocks, each with its index written in (one block reused: nothing accumulates). */
const body = () =>
  Readable.from(
    (function* () {
      for (let i = 0; i < SIZE / MiB; i += 1) {
        const block = Buffer.from(BLOCK);
        block.writeUInt32BE(i, 0);
        yield block;
      }
    })(),
  );

/** A sink that counts what it is given. */
function counter(): Writable & { bytes: number } {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      sink.bytes += chunk.length;
      done();
    },
  }) as Writable & { bytes: number };
  sink.bytes = 0;
  return sink;
}

/** MiB/s of one streamed transfer of SIZE bytes. */
async function rate(transfer: () => Promise<number>): Promise<number> {
  const started = performance.now();
  const bytes = await transfer();
  if (bytes !== SIZE) throw new Error(`moved ${bytes} bytes, not ${SIZE}`);
  return SIZE / MiB / ((performance.now() - started) / 1000);
}

async function drain(stream: Readable): Promise<number> {
  const sink = counter();
  await pipeline(stream, sink);
  return sink.bytes;
}

async function api(base: string, token: string, method: string, route: string, payload?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: payload === undefined ? undefined : JSON.stringify(payload),
  });
  if (res.status !== 200) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

/** What HTTP alone carries here: a bare node:http server on the service's core, discarding an upload. */
async function httpCeiling(): Promise<number> {
  const port = 18189;
  const sink = spawnPinned(serverCpu, ['-e', `require('node:http').createServer((q, s) => { q.resume(); q.on('end', () => s.end('ok')); }).listen(${port}, '127.0.0.1')`], {});
  try {
    await waitReady(`http://127.0.0.1:${port}/`);
    return await rate(() => put(`http://127.0.0.1:${port}/`, {}));
  } finally {
    await stop(sink);
  }
}

/** Streams SIZE bytes in one PUT; resolves with SIZE when the answer is 200. */
function put(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const req = http.request(url, { method: 'PUT', headers: { ...headers, 'Content-Length': String(SIZE) } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(SIZE) : reject(new Error(`upload answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    pipeline(body(), req).catch(reject);
  });
}

/** Upload then download through the service: MiB/s each way and the service's RSS. */
async function throughService(env: Record<string, string>): Promise<{ up: number; down: number; before: number; peak: number }> {
  const base = `http://127.0.0.1:${env.PORT}`;
  const service = spawnPinned(serverCpu, ['dist/src/server.js'], env);
  try {
    await waitReady(`${base}/readyz`);
    const token = await signDevToken(await loadDevAuthMaterial(env.DATA_DIR as string), 'bench-files');
    const { file } = (await api(base, token, 'POST', '/api/v1/files', { name: 'big.bin', mimeType: 'application/octet-stream', sizeBytes: SIZE })) as { file: { fileId: string } };
    const { upload } = (await api(base, token, 'POST', '/api/v1/files/upload-url', { fileId: file.fileId })) as { upload: { url: string; headers: Record<string, string> } };
    const before = rssMiB(service.pid as number);
    const peak = peakRss(service.pid as number);
    const up = await rate(() => put(upload.url, upload.headers));
    const down = await rate(
      () =>
        new Promise<number>((resolve, reject) => {
          http
            .get(`${base}/api/v1/files/${file.fileId}/content`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
              if (res.statusCode !== 200) reject(new Error(`download answered ${res.statusCode}`));
              drain(res).then(resolve, reject);
            })
            .on('error', reject);
        }),
    );
    return { up, down, before, peak: peak.stop() };
  } finally {
    await stop(service);
  }
}

export async function filesBench(env: Record<string, string>): Promise<Array<[string, string]>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-bench-files-'));
  const port = Number(env.PORT) + 1;
  const s3 = spawnPinned(clientCpu, ['--import', 'tsx', 'bench/s3-server.ts', String(port), path.join(dir, 's3')], {});
  const s3Env = {
    S3_ENDPOINT: `http://127.0.0.1:${port}`,
    S3_BUCKET: 'bench',
    S3_REGION: 'us-east-1',
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
    S3_FORCE_PATH_STYLE: 'true',
  };
  const rows: Array<[string, string]> = [];
  const report = (store: string, raw: { up: number; down: number }, service: Awaited<ReturnType<typeof throughService>>) => {
    rows.push([`B4 ${store}: upload 256 MiB, raw store → service (MiB/s)`, `${raw.up.toFixed(0)} → ${service.up.toFixed(0)}`]);
    rows.push([`B4 ${store}: upload ratio service / raw (goal ≥ 0.7)`, (service.up / raw.up).toFixed(3)]);
    rows.push([`B4 ${store}: download 256 MiB, raw store → service (MiB/s)`, `${raw.down.toFixed(0)} → ${service.down.toFixed(0)}`]);
    rows.push([`B4 ${store}: download ratio service / raw (goal ≥ 0.7)`, (service.down / raw.down).toFixed(3)]);
    rows.push([`B4 ${store}: service RSS before → peak, growth (MiB; goal < 64)`, `${service.before.toFixed(1)} → ${service.peak.toFixed(1)}, ${(service.peak - service.before).toFixed(1)}`]);
  };
  try {
    await waitReady(`http://127.0.0.1:${port}/bench`);
    const ceiling = await httpCeiling();
    rows.push(['B4 HTTP alone: bare node:http on the same core, discarding a 256 MiB upload (MiB/s)', ceiling.toFixed(0)]);
    // Local directory: file streams, as the store writes and reads them.
    const target = path.join(dir, 'raw.bin');
    const localRaw = {
      up: await rate(async () => {
        await pipeline(body(), fs.createWriteStream(target));
        return fs.statSync(target).size;
      }),
      down: await rate(() => drain(fs.createReadStream(target, { highWaterMark: MiB }))),
    };
    fs.rmSync(target);
    const local = await throughService({ ...env, DATA_DIR: path.join(dir, 'local') });
    report('local directory', localRaw, local);
    rows.push(['B4 local directory: upload ratio service / HTTP alone', (local.up / ceiling).toFixed(3)]);

    // S3: the service's adapter (the AWS SDK), in this process, against the same server.
    const store = new S3ObjectStore(loadConfig({ DATA_DIR: dir, ...s3Env }).storage.s3 as NonNullable<ReturnType<typeof loadConfig>['storage']['s3']>);
    const s3Raw = {
      up: await rate(async () => (await store.put('raw.bin', body(), { contentType: 'application/octet-stream', size: SIZE })).size),
      down: await rate(async () => drain(await store.get('raw.bin'))),
    };
    await store.delete('raw.bin');
    store.close();
    report('S3 (s3rver)', s3Raw, await throughService({ ...env, ...s3Env, DATA_DIR: path.join(dir, 's3-service') }));
    return rows;
  } finally {
    await stop(s3);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const port = '18185';
  filesBench({ PORT: port, LOG_LEVEL: 'warn', NODE_ENV: 'development', ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}) }).then((rows) => {
    for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  });
}
