/**
 * One 256 MiB transfer of B4, as the client of its own process (started by bench/files.ts on the
 * client's core): a fresh client for every transfer, raw or through the service, so that none
 * reads with the heap and the buffers another one left behind. Prints the MiB/s it measured, from
 * its first byte sent or asked for to its last byte taken (its start-up not counted).
 *   tsx bench/transfer.ts file-write <path> | file-read <path>
 *   tsx bench/transfer.ts http-put <url> [headers JSON] | http-get <url> [headers JSON]
 *   tsx bench/transfer.ts tcp-get <port>                  (a socket on 127.0.0.1 that sends SIZE bytes)
 *   tsx bench/transfer.ts s3-put <key> | s3-get <key>     (the S3_* settings from the environment)
 */
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { loadConfig } from '../src/config';
import { S3ObjectStore } from '../src/platform/storage/s3';

export const SIZE = 256 * 1024 * 1024;
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

/** Reads a stream to its end; the number of bytes it gave. */
async function drain(stream: Readable): Promise<number> {
  let bytes = 0;
  await pipeline(
    stream,
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        bytes += chunk.length;
        done();
      },
    }),
  );
  return bytes;
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

/** Reads one GET's body to its end; resolves with its size when the answer is 200. */
function get(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`download answered ${res.statusCode}`));
        drain(res).then(resolve, reject);
      })
      .on('error', reject);
  });
}

/** The S3 adapter of the service, on the S3_* settings of the environment. */
function s3(): S3ObjectStore {
  const settings = loadConfig().storage.s3;
  if (!settings) throw new Error('the S3_* settings are not set');
  return new S3ObjectStore(settings);
}

type Transfer = (target: string, headers: Record<string, string>) => Promise<number>;

/** Each kind's transfer, made ready (its client built) before the clock starts. */
const transfers: Record<string, () => Transfer> = {
  'file-write': () => async (file) => {
    await pipeline(body(), fs.createWriteStream(file));
    return fs.statSync(file).size;
  },
  'file-read': () => (file) => drain(fs.createReadStream(file, { highWaterMark: MiB })),
  'http-put': () => put,
  'http-get': () => get,
  'tcp-get': () => (port) => drain(net.connect(Number(port), '127.0.0.1')),
  's3-put': () => {
    const store = s3();
    return async (key) => (await store.put(key, body(), { contentType: 'application/octet-stream', size: SIZE })).size;
  },
  's3-get': () => {
    const store = s3();
    return async (key) => drain(await store.get(key));
  },
};

async function main(): Promise<void> {
  const [kind = '', target = '', headers = '{}'] = process.argv.slice(2);
  const prepare = transfers[kind];
  if (!prepare || !target) throw new Error(`usage: transfer.ts <${Object.keys(transfers).join('|')}> <path|url|key> [headers JSON]`);
  const transfer = prepare();
  const started = performance.now();
  const bytes = await transfer(target, JSON.parse(headers) as Record<string, string>);
  const seconds = (performance.now() - started) / 1000;
  if (bytes !== SIZE) throw new Error(`moved ${bytes} bytes, not ${SIZE}`);
  process.stdout.write(`${SIZE / MiB / seconds}\n`);
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
