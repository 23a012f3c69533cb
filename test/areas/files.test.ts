import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { SignedUrls } from '../../src/platform/signed-urls';
import { describeCrudContract } from '../helpers/crud-contract';
import { createFile, pathOf, storeFile, uploadUrl } from '../helpers/files';
import { binaryBody, useHarness } from '../helpers/harness';
import { eventually } from '../helpers/receiver';
import { makePdf } from '../fixtures/pdf';

const ctx = useHarness('alice', 'bob', 'carol');
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** Objects the local store holds for a file (it keeps them under objects/files/<owner>/<fileId>/). */
const objectsOf = (owner: string, fileId: string) => {
  const dir = path.join(ctx.h.runtime.config.dataDir, 'objects', 'files', owner, fileId);
  return fs.existsSync(dir) ? fs.readdirSync(dir) : [];
};

describe('upload and content', () => {
  const content = Buffer.from('Hello, world. '.repeat(1000));

  test('the upload takes the documented application/octet-stream or any other Content-Type; content keeps the file’s type', async () => {
    const { alice } = ctx;
    for (const type of ['application/octet-stream', 'image/png', 'text/plain; charset=utf-8']) {
      const file = await createFile(ctx.h, alice, { name: 'note.txt', mimeType: 'text/plain', sizeBytes: content.length });
      const upload = await uploadUrl(ctx.h, alice, file.fileId);
      const stored = await ctx.h.http().put(pathOf(upload.url)).set('Content-Type', type).send(content);
      expect({ type, status: stored.status }).toEqual({ type, status: 200 });
      const res = await ctx.h.http().get(`/api/v1/files/${file.fileId}/content`).set(alice.auth).buffer(true).parse(binaryBody);
      expect(res.headers['content-type']).toMatch(/^text\/plain/);
    }
  });

  test('create → upload URL → upload → ready → content, byte-identical', async () => {
    const { alice } = ctx;
    const file = await createFile(ctx.h, alice, { name: 'hello.txt', mimeType: 'text/plain', sizeBytes: content.length });
    expect(file).toMatchObject({ status: 'pending', sha256: null, contentUrl: null, access: 'owner', kind: 'file' });
    const upload = await uploadUrl(ctx.h, alice, file.fileId);
    expect(upload).toMatchObject({ method: 'PUT', headers: { 'Content-Type': 'text/plain' }, maxBytes: content.length });
    expect(upload.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/v1\/files\/.+\/upload\?token=/);
    const stored = await ctx.h.http().put(pathOf(upload.url)).set(upload.headers).send(content);
    expect(stored.status).toBe(200);
    expect(stored.body.file).toMatchObject({ status: 'ready', sha256: sha(content), sizeBytes: content.length });

    const res = await ctx.h.http().get(`/api/v1/files/${file.fileId}/content`).set(alice.auth).buffer(true).parse(binaryBody);
    expect(res.status).toBe(200);
    expect((res.body as Buffer).equals(content)).toBe(true);
    expect(res.headers).toMatchObject({ etag: `"${sha(content)}"`, 'x-content-type-options': 'nosniff', 'accept-ranges': 'bytes' });
    expect(res.headers['content-disposition']).toMatch(/^inline; filename="hello.txt"/);
  });

  test('ranges, ETags and the content URL', async () => {
    const { alice } = ctx;
    const file = await storeFile(ctx.h, alice, 'range.txt', 'text/plain', content);
    const part = await ctx.h
      .http()
      .get(`/api/v1/files/${file.fileId}/content`)
      .set(alice.auth)
      .set('Range', 'bytes=7-11')
      .buffer(true)
      .parse(binaryBody);
    expect(part.status).toBe(206);
    expect((part.body as Buffer).toString()).toBe('world');
    expect(part.headers['content-range']).toBe(`bytes 7-11/${content.length}`);
    const tail = await ctx.h
      .http()
      .get(`/api/v1/files/${file.fileId}/content`)
      .set(alice.auth)
      .set('Range', 'bytes=-3')
      .buffer(true)
      .parse(binaryBody);
    expect((tail.body as Buffer).toString()).toBe(content.subarray(-3).toString());
    const outside = await ctx.h
      .http()
      .get(`/api/v1/files/${file.fileId}/content`)
      .set(alice.auth)
      .set('Range', `bytes=${content.length + 5}-`);
    expect(outside.status).toBe(416);
    expect(outside.headers['content-range']).toBe(`bytes */${content.length}`);
    const cached = await ctx.h.http().get(`/api/v1/files/${file.fileId}/content`).set(alice.auth).set('If-None-Match', `"${file.sha256}"`);
    expect(cached.status).toBe(304);

    // The content URL works without other credentials, for this file only, until it expires.
    expect(file.contentUrl).toMatch(/\/content\?token=/);
    const viaUrl = await ctx.h
      .http()
      .get(file.contentUrl as string)
      .buffer(true)
      .parse(binaryBody);
    expect(viaUrl.status).toBe(200);
    expect((viaUrl.body as Buffer).equals(content)).toBe(true);
    const other = await storeFile(ctx.h, alice, 'other.txt', 'text/plain', Buffer.from('other'));
    const token = new URL(file.contentUrl as string, 'http://x').searchParams.get('token') as string;
    expect((await ctx.h.http().get(`/api/v1/files/${other.fileId}/content`).query({ token })).status).toBe(401);
    const expired = await new SignedUrls(ctx.h.runtime.devAuth!.cookieSecret, -60).sign({
      userId: alice.userId,
      fileId: file.fileId,
      purpose: 'content',
    });
    const gone = await ctx.h.http().get(`/api/v1/files/${file.fileId}/content`).query({ token: expired.token });
    expect(gone.status).toBe(410);
    expect(gone.body.code).toBe('link_expired');
    expect(
      (
        await ctx.h
          .http()
          .get(`/api/v1/files/${file.fileId}/content`)
          .query({ token: `${token}x` })
      ).status,
    ).toBe(401);
  });

  test('an HTML file is downloaded as an attachment, with nosniff', async () => {
    const file = await storeFile(ctx.h, ctx.alice, 'page.html', 'text/html', Buffer.from('<script>alert(1)</script>'));
    const res = await ctx.h.http().get(`/api/v1/files/${file.fileId}/content`).set(ctx.alice.auth);
    expect(res.headers['content-disposition']).toMatch(/^attachment; filename="page.html"/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-security-policy']).toMatch(/sandbox/);
    for (const [name, type] of [
      ['a.svg', 'image/svg+xml'],
      ['a.xml', 'application/xml'],
    ]) {
      const active = await storeFile(ctx.h, ctx.alice, name as string, type as string, Buffer.from('<x/>'));
      const served = await ctx.h.http().get(`/api/v1/files/${active.fileId}/content`).set(ctx.alice.auth);
      expect(served.headers['content-disposition']).toMatch(/^attachment/);
    }
  });

  test('an upload URL is single-use and expires; a forged one is refused', async () => {
    const { alice } = ctx;
    const file = await createFile(ctx.h, alice, { name: 'once.txt', mimeType: 'text/plain', sizeBytes: 5 });
    const upload = await uploadUrl(ctx.h, alice, file.fileId);
    const forged = pathOf(upload.url).replace(/token=([^&]+)/, (_m, t: string) => `token=${t.slice(0, -2)}xx`);
    expect((await ctx.h.http().put(forged).set(upload.headers).send(Buffer.from('hello'))).status).toBe(401);
    expect((await ctx.h.http().put(pathOf(upload.url)).set(upload.headers).send(Buffer.from('hello'))).status).toBe(200);
    const reused = await ctx.h.http().put(pathOf(upload.url)).set(upload.headers).send(Buffer.from('hello'));
    expect(reused.status).toBe(410);
    expect(reused.body.code).toBe('link_used');
    expect((await ctx.h.http().post('/api/v1/files/upload-url').set(alice.auth).send({ fileId: file.fileId })).status).toBe(409);

    const pending = await createFile(ctx.h, alice, { name: 'late.txt', mimeType: 'text/plain', sizeBytes: 5 });
    const expired = await new SignedUrls(ctx.h.runtime.devAuth!.cookieSecret, -60).sign({
      userId: alice.userId,
      fileId: pending.fileId,
      purpose: 'upload',
      size: 5,
      type: 'text/plain',
    });
    const late = await ctx.h
      .http()
      .put(`/api/v1/files/${pending.fileId}/upload`)
      .query({ token: expired.token })
      .set('Content-Type', 'text/plain')
      .send(Buffer.from('hello'));
    expect(late.status).toBe(410);
    expect(late.body.code).toBe('link_expired');
    // An upload URL cannot be used on another file, nor as a content URL.
    const elsewhere = await uploadUrl(ctx.h, alice, pending.fileId);
    const token = new URL(elsewhere.url).searchParams.get('token') as string;
    expect((await ctx.h.http().put(`/api/v1/files/${file.fileId}/upload`).query({ token }).send(Buffer.from('hello'))).status).toBe(401);
    expect((await ctx.h.http().get(`/api/v1/files/${pending.fileId}/content`).query({ token })).status).toBe(401);
  });

  test('an oversized upload is a 413 and leaves no ready file and no object', async () => {
    const { alice } = ctx;
    const file = await createFile(ctx.h, alice, { name: 'small.txt', mimeType: 'text/plain', sizeBytes: 10 });
    const upload = await uploadUrl(ctx.h, alice, file.fileId);
    const res = await ctx.h.http().put(pathOf(upload.url)).set(upload.headers).send(Buffer.alloc(11, 97));
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('payload_too_large');
    const after = await ctx.h.http().get('/api/v1/files').query({ fileId: file.fileId }).set(alice.auth);
    expect(after.body.file.status).not.toBe('ready');
    expect(objectsOf(alice.userId, file.fileId)).toEqual([]);
    const short = await uploadUrl(ctx.h, alice, file.fileId);
    expect((await ctx.h.http().put(pathOf(short.url)).set(short.headers).send(Buffer.alloc(9, 97))).status).toBe(400);
    expect(objectsOf(alice.userId, file.fileId)).toEqual([]);
    expect(
      (
        await ctx.h
          .http()
          .post('/api/v1/files')
          .set(alice.auth)
          .send({ name: 'huge.bin', mimeType: 'application/octet-stream', sizeBytes: 6 * 1024 ** 3 })
      ).status,
    ).toBe(413);
  });

  test('an interrupted upload leaves no ready file and no object', async () => {
    const { alice } = ctx;
    const size = 4 * 1024 * 1024;
    const file = await createFile(ctx.h, alice, { name: 'cut.bin', mimeType: 'application/octet-stream', sizeBytes: size });
    const upload = await uploadUrl(ctx.h, alice, file.fileId);
    await new Promise<void>((resolve) => {
      const req = http.request(upload.url, { method: 'PUT', headers: { ...upload.headers, 'Content-Length': String(size) } });
      req.on('error', () => resolve());
      req.write(Buffer.alloc(size / 4, 1), () =>
        setTimeout(() => {
          req.destroy();
          resolve();
        }, 100),
      );
    });
    await eventually(async () => {
      const status = (await ctx.h.http().get('/api/v1/files').query({ fileId: file.fileId }).set(alice.auth)).body.file.status;
      return status === 'failed' ? true : undefined;
    });
    expect(objectsOf(alice.userId, file.fileId)).toEqual([]);
    expect(fs.readdirSync(path.join(ctx.h.runtime.config.dataDir, 'objects', '.incoming'))).toEqual([]);
  });
});

describe('ownership and sharing', () => {
  test('another user gets 404 everywhere; a grantee reads but cannot modify', async () => {
    const { alice, bob, carol } = ctx;
    const secret = `needle${randomUUID().slice(0, 8)}`;
    const file = await storeFile(ctx.h, alice, 'notes.md', 'text/markdown', Buffer.from(`# Private\n\nThe ${secret} is here.`));
    await ctx.h.http().post('/api/v1/files/ingest-document').set(alice.auth).send({ fileId: file.fileId }).expect(200);
    const as = (user: typeof bob) => ({
      metadata: () => ctx.h.http().get('/api/v1/files').query({ fileId: file.fileId }).set(user.auth),
      content: () => ctx.h.http().get(`/api/v1/files/${file.fileId}/content`).set(user.auth),
      uploadUrl: () => ctx.h.http().post('/api/v1/files/upload-url').set(user.auth).send({ fileId: file.fileId }),
      share: () =>
        ctx.h
          .http()
          .patch('/api/v1/files/share')
          .set(user.auth)
          .send({ fileId: file.fileId, add: [carol.userId] }),
      ingest: () => ctx.h.http().post('/api/v1/files/ingest-document').set(user.auth).send({ fileId: file.fileId }),
      searchFile: () => ctx.h.http().post('/api/v1/files/search-text').set(user.auth).send({ query: secret, fileId: file.fileId }),
      rename: () => ctx.h.http().patch('/api/v1/files').set(user.auth).send({ fileId: file.fileId, name: 'mine.md' }),
      remove: () => ctx.h.http().delete('/api/v1/files').query({ fileId: file.fileId }).set(user.auth),
    });
    for (const [name, call] of Object.entries(as(bob))) {
      const res = await call();
      expect({ name, status: res.status }).toEqual({ name, status: 404 });
    }
    const search = await ctx.h.http().post('/api/v1/files/search-text').set(bob.auth).send({ query: secret });
    expect(search.body.results).toEqual([]);
    expect((await ctx.h.http().get('/api/v1/files').set(bob.auth)).body.files.map((f: { fileId: string }) => f.fileId)).not.toContain(
      file.fileId,
    );

    const shared = await ctx.h
      .http()
      .patch('/api/v1/files/share')
      .set(alice.auth)
      .send({ fileId: file.fileId, add: [bob.userId] });
    expect(shared.body).toEqual({ fileId: file.fileId, sharedWith: [bob.userId] });
    const bobs = as(bob);
    expect((await bobs.metadata()).body.file).toMatchObject({ access: 'shared', sharedWith: [], ownerUserId: alice.userId });
    expect((await bobs.content()).status).toBe(200);
    expect((await bobs.searchFile()).body.results).toHaveLength(1);
    const listed = await ctx.h.http().get('/api/v1/files').query({ scope: 'shared' }).set(bob.auth);
    expect(listed.body.files.map((f: { fileId: string }) => f.fileId)).toEqual([file.fileId]);
    for (const call of [bobs.uploadUrl, bobs.share, bobs.ingest, bobs.rename, bobs.remove]) {
      const res = await call();
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('forbidden');
    }
    expect((await as(alice).metadata()).body.file).toMatchObject({ name: 'notes.md', sharedWith: [bob.userId] });
    // A page shows the owner each file's grantees, in order, and a grantee none.
    await ctx.h
      .http()
      .patch('/api/v1/files/share')
      .set(alice.auth)
      .send({ fileId: file.fileId, add: [carol.userId] })
      .expect(200);
    const inPage = async (user: typeof bob) =>
      (await ctx.h.http().get('/api/v1/files').set(user.auth).expect(200)).body.files.find(
        (f: { fileId: string }) => f.fileId === file.fileId,
      );
    expect((await inPage(alice)).sharedWith).toEqual([bob.userId, carol.userId].sort());
    expect(await inPage(bob)).toMatchObject({ access: 'shared', sharedWith: [] });
    await ctx.h
      .http()
      .patch('/api/v1/files/share')
      .set(alice.auth)
      .send({ fileId: file.fileId, remove: [carol.userId] })
      .expect(200);

    await ctx.h
      .http()
      .patch('/api/v1/files/share')
      .set(alice.auth)
      .send({ fileId: file.fileId, remove: [bob.userId] })
      .expect(200);
    expect((await bobs.content()).status).toBe(404);
    expect((await bobs.metadata()).status).toBe(404);
    expect(
      (
        await ctx.h
          .http()
          .patch('/api/v1/files/share')
          .set(alice.auth)
          .send({ fileId: file.fileId, add: [alice.userId] })
      ).status,
    ).toBe(400);
    expect((await ctx.h.http().patch('/api/v1/files/share').set(alice.auth).send({ fileId: file.fileId })).status).toBe(400);
  });
});

describe('a list of owned and shared files', () => {
  test('pages through both newest first, each filter and scope applied to both; another user sees none', async () => {
    const [owner, reader, other] = await Promise.all([ctx.h.newUser('owner'), ctx.h.newUser('reader'), ctx.h.newUser('other')]);
    // Created in turn, so that the reader's own files and those shared with it interleave by id.
    const names: string[] = [];
    for (let n = 1; n <= 6; n++) {
      const mine = n % 2 === 0;
      const file = await createFile(ctx.h, mine ? reader : owner, {
        name: `${mine ? 'mine' : 'shared'}-${n}`,
        kind: n === 5 || n === 6 ? 'folder' : 'file',
        ...(n < 5 ? { mimeType: 'text/plain', sizeBytes: n } : {}),
      });
      if (!mine)
        await ctx.h
          .http()
          .patch('/api/v1/files/share')
          .set(owner.auth)
          .send({ fileId: file.fileId, add: [reader.userId] })
          .expect(200);
      names.unshift(file.name as string);
    }
    const pages = async (user: typeof reader, query: Record<string, string>) => {
      const seen: string[][] = [];
      let cursor: string | null = null;
      do {
        const body: { files: Array<{ name: string }>; nextCursor: string | null } = (
          await ctx.h
            .http()
            .get('/api/v1/files')
            .query({ ...query, limit: 2, ...(cursor ? { cursor } : {}) })
            .set(user.auth)
            .expect(200)
        ).body;
        seen.push(body.files.map((f) => f.name));
        cursor = body.nextCursor;
      } while (cursor !== null);
      return seen;
    };
    expect(await pages(reader, {})).toEqual([names.slice(0, 2), names.slice(2, 4), names.slice(4, 6)]);
    expect((await pages(reader, { kind: 'file' })).flat()).toEqual(names.filter((n) => !['mine-6', 'shared-5'].includes(n)));
    expect((await pages(reader, { scope: 'owned' })).flat()).toEqual(['mine-6', 'mine-4', 'mine-2']);
    expect((await pages(reader, { scope: 'shared', kind: 'file' })).flat()).toEqual(['shared-3', 'shared-1']);
    expect((await pages(other, {})).flat()).toEqual([]);
    expect((await ctx.h.http().get('/api/v1/files').query({ scope: 'mine' }).set(reader.auth)).status).toBe(400);
  });
});

describe('folders', () => {
  test('files move into folders; folders never into themselves; a non-empty folder stays', async () => {
    const { alice, bob } = ctx;
    const outer = await createFile(ctx.h, alice, { name: 'Outer', kind: 'folder' });
    expect(outer).toMatchObject({ kind: 'folder', status: 'ready', mimeType: null, sizeBytes: null });
    const inner = await createFile(ctx.h, alice, { name: 'Inner', kind: 'folder', parentId: outer.fileId });
    const file = await createFile(ctx.h, alice, { name: 'a.txt', mimeType: 'text/plain', sizeBytes: 1, parentId: inner.fileId });
    expect(file.parentId).toBe(inner.fileId);
    const cycle = await ctx.h.http().patch('/api/v1/files').set(alice.auth).send({ fileId: outer.fileId, parentId: inner.fileId });
    expect(cycle.status).toBe(409);
    expect((await ctx.h.http().patch('/api/v1/files').set(alice.auth).send({ fileId: file.fileId, parentId: file.fileId })).status).toBe(
      404,
    );
    expect((await ctx.h.http().delete('/api/v1/files').query({ fileId: inner.fileId }).set(alice.auth)).status).toBe(409);
    const bobsFolder = await createFile(ctx.h, bob, { name: 'Bob', kind: 'folder' });
    expect(
      (await ctx.h.http().post('/api/v1/files').set(alice.auth).send({ name: 'x', kind: 'folder', parentId: bobsFolder.fileId })).status,
    ).toBe(404);
    expect(
      (await ctx.h.http().post('/api/v1/files').set(alice.auth).send({ name: 'x', kind: 'folder', mimeType: 'text/plain' })).status,
    ).toBe(400);
    expect((await ctx.h.http().post('/api/v1/files').set(alice.auth).send({ name: 'x.txt', mimeType: 'text/plain' })).status).toBe(400);
    const children = await ctx.h.http().get('/api/v1/files').query({ parentId: inner.fileId }).set(alice.auth);
    expect(children.body.files.map((f: { fileId: string }) => f.fileId)).toEqual([file.fileId]);
  });

  test('deleting a file removes its object', async () => {
    const file = await storeFile(ctx.h, ctx.alice, 'bye.txt', 'text/plain', Buffer.from('bye'));
    expect(objectsOf(ctx.alice.userId, file.fileId)).toHaveLength(1);
    await ctx.h.http().delete('/api/v1/files').send({ fileId: file.fileId }).set(ctx.alice.auth).expect(200);
    expect(objectsOf(ctx.alice.userId, file.fileId)).toEqual([]);
  });
});

describe('ingestion and text search', () => {
  test('finds a phrase in a PDF and in a Markdown file, with snippets and positions', async () => {
    const { alice } = ctx;
    const tag = randomUUID().slice(0, 8);
    const pdf = await storeFile(
      ctx.h,
      alice,
      'report.pdf',
      'application/pdf',
      makePdf([
        ['Annual report', 'The board met twice.'],
        [`Page two has the quarterly revenue table ${tag}pdf.`, 'Costs fell.'],
      ]),
    );
    const markdown = `# Plans\n\n${'Filler sentence about gardening. '.repeat(80)}\n\nOur quarterly revenue grew in spring ${tag}md.\n`;
    const md = await storeFile(ctx.h, alice, 'plans.md', 'text/markdown', Buffer.from(markdown));
    for (const file of [pdf, md]) {
      const res = await ctx.h.http().post('/api/v1/files/ingest-document').set(alice.auth).send({ fileId: file.fileId });
      expect(res.status).toBe(200);
      expect(res.body.ingestion).toMatchObject({ fileId: file.fileId, status: 'ready', chunkCount: expect.any(Number) });
    }
    const after = await ctx.h.http().get('/api/v1/files').query({ fileId: md.fileId }).set(alice.auth);
    expect(after.body.file.ingestion).toMatchObject({ status: 'ready', progress: 1, chunkCount: expect.any(Number), error: null });

    const inPdf = await ctx.h
      .http()
      .post('/api/v1/files/search-text')
      .set(alice.auth)
      .send({ query: `"quarterly revenue" ${tag}pdf` });
    expect(inPdf.status).toBe(200);
    expect(inPdf.body.results).toHaveLength(1);
    expect(inPdf.body.results[0]).toMatchObject({ fileId: pdf.fileId, fileName: 'report.pdf' });
    expect(inPdf.body.results[0].snippet).toMatch(/«quarterly» «revenue»/);

    const inMd = await ctx.h
      .http()
      .post('/api/v1/files/search-text')
      .set(alice.auth)
      .send({ query: `quarterly revenue ${tag}md`, fileId: md.fileId });
    const hit = inMd.body.results[0];
    expect(hit).toMatchObject({ fileId: md.fileId });
    expect(markdown.slice(hit.startOffset, hit.endOffset)).toContain(`quarterly revenue grew in spring ${tag}md`);
    const plain = (hit.snippet as string).replace(/[«»]/g, '');
    expect(hit.highlights.map((h: { start: number; end: number }) => plain.slice(h.start, h.end))).toEqual(
      expect.arrayContaining(['quarterly', 'revenue']),
    );

    // Re-ingest replaces the chunks: the same matches, not twice as many.
    await ctx.h.http().post('/api/v1/files/ingest-document').set(alice.auth).send({ fileId: md.fileId }).expect(200);
    const again = await ctx.h
      .http()
      .post('/api/v1/files/search-text')
      .set(alice.auth)
      .send({ query: `${tag}md` });
    expect(again.body.results).toHaveLength(1);
  });

  test('unsupported types are 415; files that are not ready are 409; bad queries are 400', async () => {
    const { alice } = ctx;
    const png = await storeFile(ctx.h, alice, 'pic.png', 'image/png', Buffer.from([137, 80, 78, 71]));
    const res = await ctx.h.http().post('/api/v1/files/ingest-document').set(alice.auth).send({ fileId: png.fileId });
    expect(res.status).toBe(415);
    expect(res.body.code).toBe('unsupported_media_type');
    const pending = await createFile(ctx.h, alice, { name: 'later.txt', mimeType: 'text/plain', sizeBytes: 3 });
    expect((await ctx.h.http().post('/api/v1/files/ingest-document').set(alice.auth).send({ fileId: pending.fileId })).status).toBe(409);
    for (const body of [{}, { query: '' }, { query: '   ' }, { query: 'x', limit: 101 }, { query: 'x', other: 1 }]) {
      expect((await ctx.h.http().post('/api/v1/files/search-text').set(alice.auth).send(body)).status).toBe(400);
    }
  });

  test('HTML, JSON and CSV are searchable too', async () => {
    const { alice } = ctx;
    const tag = randomUUID().slice(0, 8);
    const docs: Array<[string, string, string]> = [
      ['page.html', 'text/html', `<html><body><h1>Title</h1><p>Hidden treasure map ${tag}html</p><script>var x;</script></body></html>`],
      ['data.json', 'application/json', JSON.stringify({ note: `treasure map ${tag}json` })],
      ['rows.csv', 'text/csv', `name,value\ntreasure map,${tag}csv\n`],
    ];
    for (const [name, type, text] of docs) {
      const file = await storeFile(ctx.h, alice, name, type, Buffer.from(text));
      await ctx.h.http().post('/api/v1/files/ingest-document').set(alice.auth).send({ fileId: file.fileId }).expect(200);
      const kind = name.split('.')[1];
      const found = await ctx.h
        .http()
        .post('/api/v1/files/search-text')
        .set(alice.auth)
        .send({ query: `treasure ${tag}${kind}` });
      expect({ name, hits: found.body.results.length }).toEqual({ name, hits: 1 });
    }
  });
});

describe('files: the collection contract', () => {
  describeCrudContract(
    {
      path: '/api/v1/files',
      idField: 'fileId',
      one: 'file',
      many: 'files',
      create: (n) => ({ name: `File ${n}.txt`, mimeType: 'text/plain', sizeBytes: n }),
      update: { name: 'Renamed.txt' },
      invalidCreates: [
        {},
        { name: 'a/b', mimeType: 'text/plain', sizeBytes: 1 },
        { name: 'x', mimeType: 'not a type', sizeBytes: 1 },
        { name: 'x', mimeType: 'text/plain', sizeBytes: -1 },
        { name: 'x', kind: 'link' },
      ],
      invalidUpdates: [{ name: '' }, { name: 'x'.repeat(256) }, { omitId: true }, { parentId: '' }],
    },
    () => ctx.h,
  );
});
