import { binaryBody, startHarness } from '../helpers/harness';
import { createFile, putBytes, storeFile, uploadUrl } from '../helpers/files';
import { startS3 } from '../helpers/s3';

describe('an object store that cannot be reached', () => {
  test('uploads and content reads answer 503 storage_unavailable, nothing is marked ready, /readyz goes red', async () => {
    const s3 = await startS3();
    const h = await startHarness(s3.env);
    try {
      const user = await h.newUser('store-down');
      const ready = await storeFile(h, user, 'before.txt', 'text/plain', Buffer.from('stored while the store was up'));
      const output = await h.runtime.services.outputs.create({
        ownerUserId: user.userId,
        type: 'text',
        name: 'o.txt',
        mimeType: 'text/plain',
        body: Buffer.from('out'),
      });
      const pending = await createFile(h, user, { name: 'after.txt', mimeType: 'text/plain', sizeBytes: 5 });
      const upload = await uploadUrl(h, user, pending.fileId);
      await s3.close();

      const put = await putBytes(upload.url, upload.headers, Buffer.from('hello'));
      expect(put).toMatchObject({ status: 503, body: { code: 'storage_unavailable', error: expect.any(String) } });
      const after = await h.http().get('/api/v1/files').query({ fileId: pending.fileId }).set(user.auth);
      expect(after.body.file.status).not.toBe('ready');
      expect(after.body.file.sha256).toBeNull();

      const content = await h.http().get(`/api/v1/files/${ready.fileId}/content`).set(user.auth).buffer(true).parse(binaryBody);
      expect(content.status).toBe(503);
      expect(content.headers['retry-after']).toBe('5');
      expect(JSON.parse((content.body as Buffer).toString('utf8')).code).toBe('storage_unavailable');
      const out = await h.http().get(`/api/v1/outputs/${output.id}/content`).set(user.auth);
      expect(out.status).toBe(503);
      const ingest = await h.http().post('/api/v1/files/ingest-document').set(user.auth).send({ fileId: ready.fileId });
      expect(ingest.status).toBe(503);

      const readiness = await h.http().get('/readyz');
      expect(readiness.status).toBe(503);
      expect(readiness.body.checks).toMatchObject({ database: true, storage: false });
      expect((await h.http().get('/healthz')).status).toBe(200);
    } finally {
      await h.close();
    }
  }, 180_000);
});
