import { createHash } from 'node:crypto';
import { storeFile } from '../helpers/files';
import { binaryBody, type Harness, startHarness, type TestUser } from '../helpers/harness';
import { startS3 } from '../helpers/s3';

/**
 * Range requests (RFC 9110 §13.1.5, §14) on every content route, over the local store and S3:
 * the one shared implementation in src/http/content.ts answers both routes the same way.
 */
const content = Buffer.from(Array.from({ length: 1024 }, (_, i) => (i * 7) % 256));
const etag = `"${createHash('sha256').update(content).digest('hex')}"`;
const SIZE = content.length;

interface Case {
  name: string;
  headers: Record<string, string>;
  status: 200 | 206 | 304 | 416;
  /** The bytes served, as [start, end] inclusive (206), or the whole content (200). */
  part?: [number, number];
}

const cases: Case[] = [
  { name: 'a plain range', headers: { Range: 'bytes=10-19' }, status: 206, part: [10, 19] },
  { name: 'a suffix within the content', headers: { Range: 'bytes=-100' }, status: 206, part: [SIZE - 100, SIZE - 1] },
  { name: 'a suffix longer than the content is all of it', headers: { Range: 'bytes=-99999' }, status: 206, part: [0, SIZE - 1] },
  { name: 'an open range', headers: { Range: 'bytes=1000-' }, status: 206, part: [1000, SIZE - 1] },
  { name: 'a last position past the end is cut to the end', headers: { Range: 'bytes=1000-5000' }, status: 206, part: [1000, SIZE - 1] },
  { name: 'an unknown unit is ignored', headers: { Range: 'items=0-9' }, status: 200 },
  { name: 'the unit is case-insensitive', headers: { Range: 'Bytes=0-9' }, status: 206, part: [0, 9] },
  { name: 'a last position before the first is an invalid range, ignored', headers: { Range: 'bytes=5-2' }, status: 200 },
  { name: 'a malformed range is ignored', headers: { Range: 'bytes=abc' }, status: 200 },
  { name: 'one invalid spec makes the whole set invalid', headers: { Range: 'bytes=0-9,x' }, status: 200 },
  { name: 'overlapping ranges are merged into one', headers: { Range: 'bytes=0-9, 5-19' }, status: 206, part: [0, 19] },
  { name: 'adjacent ranges are merged into one', headers: { Range: 'bytes=10-19,0-9' }, status: 206, part: [0, 19] },
  { name: 'disjoint ranges get the whole content', headers: { Range: 'bytes=0-9,20-29' }, status: 200 },
  {
    name: 'an unsatisfiable spec beside a satisfiable one is dropped',
    headers: { Range: 'bytes=5000-6000,0-4' },
    status: 206,
    part: [0, 4],
  },
  { name: 'a range past the end is a 416', headers: { Range: `bytes=${SIZE}-` }, status: 416 },
  { name: 'an empty suffix is a 416', headers: { Range: 'bytes=-0' }, status: 416 },
  { name: 'If-Range with the current ETag serves the range', headers: { Range: 'bytes=0-9', 'If-Range': etag }, status: 206, part: [0, 9] },
  { name: 'If-Range with another ETag serves the whole content', headers: { Range: 'bytes=0-9', 'If-Range': '"0000"' }, status: 200 },
  {
    name: 'If-Range with the weak form of the ETag does not match (strong comparison)',
    headers: { Range: 'bytes=0-9', 'If-Range': `W/${etag}` },
    status: 200,
  },
  {
    name: 'If-Range with a date serves the whole content (no Last-Modified to match)',
    headers: { Range: 'bytes=0-9', 'If-Range': 'Wed, 21 Oct 2015 07:28:00 GMT' },
    status: 200,
  },
  {
    name: 'If-Range that fails turns an unsatisfiable range into the whole content',
    headers: { Range: `bytes=${SIZE}-`, 'If-Range': '"0000"' },
    status: 200,
  },
  { name: 'If-Range without Range is ignored', headers: { 'If-Range': '"0000"' }, status: 200 },
  { name: 'If-None-Match compares weakly', headers: { 'If-None-Match': `W/${etag}` }, status: 304 },
];

const emptyCases: Case[] = [
  { name: 'an open range of an empty content', headers: { Range: 'bytes=0-' }, status: 200 },
  { name: 'a suffix of an empty content', headers: { Range: 'bytes=-5' }, status: 200 },
  { name: 'a closed range of an empty content', headers: { Range: 'bytes=0-9' }, status: 200 },
];

interface Route {
  name: string;
  /** Stores `body` as the user's and returns its content path. */
  store: (h: Harness, user: TestUser, body: Buffer) => Promise<string>;
}

const routes: Route[] = [
  {
    name: 'files',
    store: async (h, user, body) =>
      `/api/v1/files/${(await storeFile(h, user, 'data.bin', 'application/octet-stream', body)).fileId}/content`,
  },
  {
    name: 'outputs',
    store: async (h, user, body) => {
      const output = await h.runtime.services.outputs.create({
        ownerUserId: user.userId,
        type: 'document',
        name: 'data.bin',
        mimeType: 'application/octet-stream',
        body,
      });
      return `/api/v1/outputs/${output.id}/content`;
    },
  },
];

describe.each(['local', 's3'])('Range on the content routes, %s store', (store) => {
  let h: Harness;
  let s3: Awaited<ReturnType<typeof startS3>> | undefined;
  let user: TestUser;
  const paths = new Map<string, { full: string; empty: string }>();

  beforeAll(async () => {
    if (store === 's3') s3 = await startS3();
    h = await startHarness(s3?.env ?? {});
    user = await h.newUser('ranges');
    for (const route of routes)
      paths.set(route.name, { full: await route.store(h, user, content), empty: await route.store(h, user, Buffer.alloc(0)) });
  });
  afterAll(async () => {
    await h?.close();
    await s3?.close();
  });

  const check = async (path: string, c: Case, whole: Buffer) => {
    const res = await h.http().get(path).set(user.auth).set(c.headers).buffer(true).parse(binaryBody);
    expect(res.status).toBe(c.status);
    if (c.status === 206) {
      const [start, end] = c.part as [number, number];
      expect(res.headers['content-range']).toBe(`bytes ${start}-${end}/${whole.length}`);
      expect(res.headers['content-length']).toBe(String(end - start + 1));
      expect((res.body as Buffer).equals(whole.subarray(start, end + 1))).toBe(true);
    } else if (c.status === 200) {
      expect(res.headers['content-range']).toBeUndefined();
      expect(res.headers['content-length']).toBe(String(whole.length));
      expect((res.body as Buffer).equals(whole)).toBe(true);
    } else if (c.status === 416) {
      expect(res.headers['content-range']).toBe(`bytes */${whole.length}`);
      expect(JSON.parse((res.body as Buffer).toString('utf8')).code).toBe('range_not_satisfiable');
    }
  };

  describe.each(routes.map((r) => r.name))('%s content', (route) => {
    test.each(cases)('$name', (c) => check(paths.get(route)!.full, c, content));
    test.each(emptyCases)('$name', (c) => check(paths.get(route)!.empty, c, Buffer.alloc(0)));
    test('HEAD ignores Range (ranges are defined for GET only)', async () => {
      const res = await h.http().head(paths.get(route)!.full).set(user.auth).set('Range', 'bytes=0-9');
      expect(res.status).toBe(200);
      expect(res.headers['content-length']).toBe(String(SIZE));
      expect(res.headers['content-range']).toBeUndefined();
    });
  });
});
