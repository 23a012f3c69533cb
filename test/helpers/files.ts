import http from 'node:http';
import type { Harness, TestUser } from './harness';

export interface FileJson {
  fileId: string;
  status: string;
  sha256: string | null;
  contentUrl: string | null;
  access: string;
  sharedWith: string[];
  [key: string]: unknown;
}

/** Upload URLs are absolute on the test server; supertest wants the path. */
export const pathOf = (url: string) => {
  const parsed = new URL(url, 'http://x');
  return `${parsed.pathname}${parsed.search}`;
};

export async function createFile(h: Harness, user: TestUser, body: Record<string, unknown>): Promise<FileJson> {
  const res = await h.http().post('/api/v1/files').set(user.auth).send(body);
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.file;
}

export async function uploadUrl(h: Harness, user: TestUser, fileId: string): Promise<{ url: string; headers: Record<string, string> }> {
  const res = await h.http().post('/api/v1/files/upload-url').set(user.auth).send({ fileId });
  if (res.status !== 200) throw new Error(`upload-url: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.upload;
}

/** Creates a file, uploads `content` through its upload URL, and returns the ready file. */
export async function storeFile(
  h: Harness,
  user: TestUser,
  name: string,
  mimeType: string,
  content: Buffer,
  extra: Record<string, unknown> = {},
): Promise<FileJson> {
  const file = await createFile(h, user, { name, mimeType, sizeBytes: content.length, ...extra });
  const upload = await uploadUrl(h, user, file.fileId);
  const res = await putBytes(upload.url, upload.headers, content);
  if (res.status !== 200) throw new Error(`upload: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.file as FileJson;
}

/** Sends raw bytes (supertest would serialise a Buffer as JSON under a JSON content type). */
export function putBytes(
  url: string,
  headers: Record<string, string>,
  body: Buffer,
): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'PUT', headers: { ...headers, 'Content-Length': String(body.length) } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (p: Buffer) => parts.push(p));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(parts).toString() || '{}') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
