import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { loadConfig } from '../../src/config';
import { openObjectStore } from '../../src/composition';
import { ObjectIncompleteError, ObjectNotFoundError, type ObjectStore, ObjectTooLargeError } from '../../src/platform/storage';
import { startS3 } from '../helpers/s3';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of stream) parts.push(p as Buffer);
  return Buffer.concat(parts);
}
/** A body that arrives in several chunks, like a network upload. */
const chunked = (b: Buffer, size = 1000) =>
  Readable.from(Array.from({ length: Math.ceil(b.length / size) }, (_, i) => b.subarray(i * size, (i + 1) * size)));

/** Some S3-compatible servers (s3rver) settle an aborted PUT after the client gave up: allow them a moment. */
async function expectGone(store: ObjectStore, key: string): Promise<void> {
  for (let i = 0; i < 300; i += 1) {
    try {
      await readAll(await store.get(key));
    } catch (error) {
      if (error instanceof ObjectNotFoundError) return;
      throw error;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${key} is still stored`);
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-store-'));
let s3: Awaited<ReturnType<typeof startS3>>;
const stores: Record<string, ObjectStore> = {};

beforeAll(async () => {
  s3 = await startS3();
  stores.local = openObjectStore(loadConfig({ DATA_DIR: dataDir }));
  stores.s3 = openObjectStore(loadConfig({ DATA_DIR: dataDir, ...s3.env }));
});
afterAll(async () => {
  for (const store of Object.values(stores)) store.close();
  await s3.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe.each(['local', 's3'])('the %s object store', (kind) => {
  const store = () => stores[kind] as ObjectStore;
  const body = Buffer.from(Array.from({ length: 10_000 }, (_, i) => i % 251));

  test('stores exactly the bytes, with their hash, and reads them whole or in ranges', async () => {
    const key = `t/${randomUUID()}`;
    expect(await store().put(key, chunked(body), { contentType: 'application/octet-stream', size: body.length })).toEqual({
      size: body.length,
      sha256: sha(body),
    });
    expect((await readAll(await store().get(key))).equals(body)).toBe(true);
    expect((await readAll(await store().get(key, { start: 100, end: 199 }))).equals(body.subarray(100, 200))).toBe(true);
    expect(store().kind).toBe(kind);
    expect(await store().isReachable()).toBe(true);
  });

  test('refuses more bytes than declared and stores nothing', async () => {
    const key = `t/${randomUUID()}`;
    await expect(
      store().put(key, chunked(body), { contentType: 'application/octet-stream', size: body.length - 1 }),
    ).rejects.toBeInstanceOf(ObjectTooLargeError);
    await expectGone(store(), key);
  });

  test('refuses fewer bytes than declared and stores nothing', async () => {
    const key = `t/${randomUUID()}`;
    await expect(
      store().put(key, chunked(body), { contentType: 'application/octet-stream', size: body.length + 1 }),
    ).rejects.toBeInstanceOf(ObjectIncompleteError);
    await expectGone(store(), key);
  });

  test('a body that fails midway stores nothing', async () => {
    const key = `t/${randomUUID()}`;
    const failing = new Readable({
      read() {
        this.push(body.subarray(0, 1000));
        this.destroy(new Error('connection reset'));
      },
    });
    await expect(store().put(key, failing, { contentType: 'application/octet-stream', size: body.length })).rejects.toThrow();
    await expectGone(store(), key);
  });

  test('deletes', async () => {
    const key = `t/${randomUUID()}`;
    await store().put(key, Readable.from([body]), { contentType: 'text/plain', size: body.length });
    await store().delete(key);
    await expectGone(store(), key);
    await store().delete(key); // deleting again is fine
  });
});

test('local keys cannot escape the store directory', async () => {
  await expect(stores.local!.put('../escape', Readable.from([Buffer.from('x')]), { contentType: 'text/plain', size: 1 })).rejects.toThrow(
    /invalid object key/,
  );
});
