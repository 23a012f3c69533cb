import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createFile, uploadUrl } from '../helpers/files';
import { startHarness } from '../helpers/harness';
import { eventually } from '../helpers/receiver';

const HOUR = 3_600_000;

describe('partial objects of uploads that never ended', () => {
  test('are removed at start and by the sweep once older than INCOMING_UPLOAD_MAX_AGE; fresh ones and uploads in progress stay', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-incoming-'));
    const incoming = path.join(dataDir, 'objects', '.incoming');
    fs.mkdirSync(incoming, { recursive: true });
    // Left by a process that stopped mid-upload a day ago, and by one that stopped minutes ago.
    const stale = path.join(incoming, 'stale-partial');
    const fresh = path.join(incoming, 'fresh-partial');
    fs.writeFileSync(stale, 'half of an object');
    fs.writeFileSync(fresh, 'half of another');
    const dayAgo = new Date(Date.now() - 25 * HOUR);
    fs.utimesSync(stale, dayAgo, dayAgo);

    const h = await startHarness({ DATA_DIR: dataDir, INCOMING_UPLOAD_MAX_AGE: '24h' });
    let upload: http.ClientRequest | null = null;
    try {
      await h.runtime.incomingSweep.runOnce(); // the start-up pass (or one after it)
      expect(fs.existsSync(stale)).toBe(false);
      expect(fs.existsSync(fresh)).toBe(true);

      // An upload in progress whose temporary file looks old is never removed.
      const user = await h.newUser('sweep');
      const content = Buffer.from('0123456789');
      const file = await createFile(h, user, { name: 'slow.txt', mimeType: 'text/plain', sizeBytes: content.length });
      const target = await uploadUrl(h, user, file.fileId);
      const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
        upload = http.request(
          target.url,
          { method: 'PUT', headers: { ...target.headers, 'Content-Length': String(content.length) } },
          (res) => {
            let body = '';
            res.on('data', (chunk: Buffer) => (body += chunk.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        upload.on('error', reject);
        upload.write(content.subarray(0, 5));
      });
      const partial = await eventually(() => fs.readdirSync(incoming).find((name) => name !== 'fresh-partial'));
      fs.utimesSync(path.join(incoming, partial), dayAgo, dayAgo);
      await h.runtime.incomingSweep.runOnce();
      expect(fs.existsSync(path.join(incoming, partial))).toBe(true);

      (upload as unknown as http.ClientRequest).end(content.subarray(5));
      const done = await answered;
      expect(done.status).toBe(200);
      expect(JSON.parse(done.body).file).toMatchObject({ status: 'ready', sizeBytes: content.length });
      const read = await h.http().get(`/api/v1/files/${file.fileId}/content`).set(user.auth);
      expect(read.status).toBe(200);
      expect(read.text).toBe(content.toString());
      expect(fs.readdirSync(incoming)).toEqual(['fresh-partial']);
    } finally {
      (upload as http.ClientRequest | null)?.destroy();
      await h.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
