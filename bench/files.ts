/**
 * B4 (part of `make bench`): a 256 MiB file uploaded and downloaded through the service (streamed
 * over HTTP: the upload URL, then the content route) against the raw store doing the same, on the
 * local directory store (the raw side: file streams, and bare node:http carrying the same bytes)
 * and on an S3 server (s3rver in its own process; the raw side: the service's S3 adapter), with
 * the service's RSS before and at its peak. Every transfer, raw or through the service, is made by
 * a client process of its own (bench/transfer.ts); the contenders take turns for BENCH_ROUNDS rounds.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadDevAuthMaterial, signDevToken } from '../src/platform/tokens';
import {
  clientCpu,
  interleaved,
  outputOf,
  peakRss,
  port,
  ratio,
  rates,
  rssMiB,
  serverCpu,
  spawnPinned,
  stop,
  waitListening,
  waitReady,
} from './process';
import { SIZE } from './transfer';

const MiB = 1024 * 1024;

/** MiB/s of one transfer (bench/transfer.ts), run by a client process of its own on the client's core. */
async function rate(
  kind: string,
  target: string,
  options: { headers?: Record<string, string>; env?: Record<string, string> } = {},
): Promise<number> {
  return Number(await outputOf(clientCpu, ['bench/transfer.ts', kind, target, JSON.stringify(options.headers ?? {})], options.env ?? {}));
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

/**
 * What HTTP alone carries here: a bare node:http server on the service's core that discards an
 * upload and answers a download of `file` from disk with a file stream, as the local store reads it.
 */
function bareHttp(port: number, file: string) {
  const server = `
    const fs = require('node:fs');
    const { pipeline } = require('node:stream/promises');
    require('node:http').createServer((req, res) => {
      if (req.method === 'PUT') return void req.resume().on('end', () => res.end('ok'));
      if (!fs.existsSync(${JSON.stringify(file)})) return void res.writeHead(404).end();
      res.setHeader('Content-Length', String(fs.statSync(${JSON.stringify(file)}).size));
      pipeline(fs.createReadStream(${JSON.stringify(file)}, { highWaterMark: ${MiB} }), res).catch(() => {});
    }).listen(${port}, '127.0.0.1');`;
  return spawnPinned(serverCpu, ['-e', server], {});
}

/**
 * What TCP alone carries here: a bare node:net server on the service's core that sends 256 MiB
 * from memory to each connection, in 1 MiB writes. Neither HTTP nor a disk: the most any HTTP
 * server on that core could send over loopback.
 */
function bareTcp(port: number) {
  const server = `
    const block = Buffer.alloc(${MiB}, 7);
    require('node:net').createServer(async (socket) => {
      socket.on('error', () => {});
      for (let sent = 0; sent < ${SIZE} && !socket.destroyed; sent += block.length) {
        if (!socket.write(block)) await new Promise((resolve) => socket.once('drain', resolve).once('close', resolve));
      }
      socket.end();
    }).listen(${port}, '127.0.0.1');`;
  return spawnPinned(serverCpu, ['-e', server], {});
}

/** The service on `env`, ready, with a way to upload a new file and to download the last one uploaded. */
async function startService(env: Record<string, string>) {
  const base = `http://127.0.0.1:${env.PORT}`;
  const child = spawnPinned(serverCpu, ['dist/src/server.js'], env);
  await waitReady(`${base}/readyz`);
  const token = await signDevToken(await loadDevAuthMaterial(env.DATA_DIR as string), 'bench-files');
  let fileId = '';
  return {
    child,
    async upload(): Promise<number> {
      ({ fileId } = (
        (await api(base, token, 'POST', '/api/v1/files', { name: 'big.bin', mimeType: 'application/octet-stream', sizeBytes: SIZE })) as {
          file: { fileId: string };
        }
      ).file);
      const { upload } = (await api(base, token, 'POST', '/api/v1/files/upload-url', { fileId })) as {
        upload: { url: string; headers: Record<string, string> };
      };
      return rate('http-put', upload.url, { headers: upload.headers });
    },
    /** Downloads the file of the last upload. */
    download: () => rate('http-get', `${base}/api/v1/files/${fileId}/content`, { headers: { authorization: `Bearer ${token}` } }),
  };
}

/** Runs `measure` against the service on `env`; the service's RSS before it and at its peak during it. */
async function withService(
  env: Record<string, string>,
  measure: (service: Awaited<ReturnType<typeof startService>>) => Promise<void>,
): Promise<{ before: number; peak: number }> {
  const service = await startService(env);
  try {
    const pid = service.child.pid as number;
    const before = rssMiB(pid);
    const sampler = peakRss(pid);
    await measure(service);
    return { before, peak: sampler.stop() };
  } finally {
    await stop(service.child);
  }
}

/**
 * B4 on both stores, each contender once per round in turn (BENCH_ROUNDS): the raw store (file
 * streams; the service's S3 adapter), for the local directory also bare HTTP carrying the same
 * bytes, then the service. Medians, with each round's figures.
 */
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
  const memory = (store: string, { before, peak }: { before: number; peak: number }) =>
    rows.push([
      `B4 ${store}: service RSS before → peak over the rounds, growth (MiB; goal < 64)`,
      `${before.toFixed(1)} → ${peak.toFixed(1)}, ${(peak - before).toFixed(1)}`,
    ]);
  const bare = bareHttp(port + 1, path.join(dir, 'raw.bin'));
  const tcp = bareTcp(port + 2);
  try {
    await waitReady(`http://127.0.0.1:${port}/bench`);
    await waitReady(`http://127.0.0.1:${port + 1}/`);
    await waitListening(port + 2);
    // Local directory: file streams, as the store writes and reads them.
    const target = path.join(dir, 'raw.bin');
    const local = await withService({ ...env, DATA_DIR: path.join(dir, 'local') }, async (service) => {
      const [rawUp, rawDown, httpUp, httpDown, tcpDown, up, down] = await interleaved(
        () => rate('file-write', target),
        () => rate('file-read', target),
        () => rate('http-put', `http://127.0.0.1:${port + 1}/`),
        () => rate('http-get', `http://127.0.0.1:${port + 1}/`),
        () => rate('tcp-get', String(port + 2)),
        () => service.upload(),
        () => service.download(),
      );
      rows.push(['B4 HTTP alone: bare node:http on the same core, discarding a 256 MiB upload (MiB/s)', rates(httpUp)]);
      rows.push(['B4 HTTP alone: bare node:http on the same core, a 256 MiB download from disk (MiB/s)', rates(httpDown)]);
      rows.push(['B4 local directory: upload 256 MiB, raw store (MiB/s)', rates(rawUp)]);
      rows.push(['B4 local directory: upload 256 MiB, service (MiB/s)', rates(up)]);
      rows.push(['B4 local directory: upload ratio service / raw (goal ≥ 0.7)', ratio(up, rawUp)]);
      rows.push(['B4 local directory: upload ratio service / HTTP alone', ratio(up, httpUp)]);
      rows.push(['B4 local directory: download 256 MiB, raw store (MiB/s)', rates(rawDown)]);
      rows.push(['B4 local directory: download 256 MiB, service (MiB/s)', rates(down)]);
      rows.push(['B4 local directory: download ratio service / raw (goal ≥ 0.7)', ratio(down, rawDown)]);
      rows.push(['B4 local directory: download ratio service / HTTP alone', ratio(down, httpDown)]);
      rows.push(['B4 TCP alone: bare node:net on the same core, 256 MiB sent from memory (MiB/s)', rates(tcpDown)]);
      rows.push(['B4 local directory: download ratio TCP alone / raw (the most any HTTP server reaches here)', ratio(tcpDown, rawDown)]);
    });
    memory('local directory', local);

    // S3: the service's adapter (the AWS SDK) in a client process against the same server.
    const s3Client = { env: { DATA_DIR: dir, ...s3Env } };
    const remote = await withService({ ...env, ...s3Env, DATA_DIR: path.join(dir, 's3-service') }, async (service) => {
      const [rawUp, rawDown, up, down] = await interleaved(
        () => rate('s3-put', 'raw.bin', s3Client),
        () => rate('s3-get', 'raw.bin', s3Client),
        () => service.upload(),
        () => service.download(),
      );
      rows.push(['B4 S3 (s3rver): upload 256 MiB, raw store → service (MiB/s)', `${rates(rawUp)} → ${rates(up)}`]);
      rows.push(['B4 S3 (s3rver): upload ratio service / raw (goal ≥ 0.7)', ratio(up, rawUp)]);
      rows.push(['B4 S3 (s3rver): download 256 MiB, raw store → service (MiB/s)', `${rates(rawDown)} → ${rates(down)}`]);
      rows.push(['B4 S3 (s3rver): download ratio service / raw (goal ≥ 0.7)', ratio(down, rawDown)]);
    });
    memory('S3 (s3rver)', remote);
    return rows;
  } finally {
    await Promise.all([stop(s3), stop(bare), stop(tcp)]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  filesBench({
    PORT: port(4),
    LOG_LEVEL: 'warn',
    NODE_ENV: 'development',
    ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
  }).then((rows) => {
    for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  });
}
