import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { type Harness, startHarness, type TestUser, userNamed, tableRowCounts, stopBackgroundWork } from '../helpers/harness';

// Text the database cannot store (NUL, lone UTF-16 surrogates) is refused at the boundary, in every
// string of the body (nested, keys too), the query and the path: 400 naming the field, nothing stored.
const NUL = '\u0000';
const refusedNul = 'must not contain the NUL character (U+0000)';
const refusedSurrogate = 'must not contain a lone UTF-16 surrogate (U+D800–U+DFFF)';

const rootId = `root-${randomUUID()}`;
let h: Harness;
let alice: TestUser;
let admin: TestUser;

beforeAll(async () => {
  h = await startHarness({ BOOTSTRAP_ADMIN_USER_IDS: rootId });
  // Background work (embedding a new note, delivering) would change row counts between the two reads.
  await stopBackgroundWork(h);
  alice = await h.newUser('alice');
  admin = await userNamed(h, rootId);
});
afterAll(() => h?.close());

const rowCounts = () => tableRowCounts(h);

async function expectRefused(send: () => Promise<{ status: number; body: Record<string, unknown> }>, path: string, message = refusedNul) {
  const before = await rowCounts();
  const res = await send();
  expect({ path, status: res.status, code: res.body.code }).toEqual({ path, status: 400, code: 'invalid_request' });
  expect(res.body.details).toEqual([{ path, message }]);
  expect(await rowCounts()).toEqual(before);
}

describe('NUL in a body field is a 400 naming it, in every area', () => {
  const creates: [string, Record<string, unknown>, string][] = [
    ['/api/v1/notes', { title: `a${NUL}b` }, '/body/title'],
    ['/api/v1/notes', { title: 'T', content: `x${NUL}` }, '/body/content'],
    ['/api/v1/projects', { name: `P${NUL}` }, '/body/name'],
    ['/api/v1/memory', { kind: 'fact', content: `${NUL}M` }, '/body/content'],
    ['/api/v1/skills', { name: 'S', instructions: `Be ${NUL} terse.` }, '/body/instructions'],
    ['/api/v1/conversations', { title: `Chat${NUL}` }, '/body/title'],
    ['/api/v1/automations', { name: 'A', prompt: `p${NUL}` }, '/body/prompt'],
    ['/api/v1/automations', { name: 'A', prompt: 'p', schedule: { cron: '0 9 * * *', timezone: `UTC${NUL}` } }, '/body/schedule/timezone'],
    ['/api/v1/agent-environments', { name: `Laptop${NUL}`, platform: 'linux', protocolVersion: 1 }, '/body/name'],
    ['/api/v1/knowledge/search', { query: `find ${NUL}` }, '/body/query'],
  ];

  test.each(creates)('POST %s %j', async (route, body, path) => {
    await expectRefused(() => h.http().post(route).set(alice.auth).send(body), path);
  });

  test('in an array item and in an object key, with the path to it', async () => {
    await expectRefused(
      () =>
        h
          .http()
          .post('/api/v1/webhooks')
          .set(alice.auth)
          .send({ url: 'https://8.8.8.8/hook', events: ['chat.completed', `chat${NUL}`] }),
      '/body/events/1',
    );
    await expectRefused(
      () =>
        h
          .http()
          .post('/api/v1/notes')
          .set(alice.auth)
          .send({ title: 'T', [`ti${NUL}tle`]: 'x' }),
      '/body/ti\uFFFDtle',
      'the property name must not contain the NUL character (U+0000)',
    );
  });

  test('an update changes nothing', async () => {
    const created = await h.http().post('/api/v1/notes').set(alice.auth).send({ title: 'Kept' }).expect(200);
    const noteId = created.body.note.noteId as string;
    await expectRefused(
      () =>
        h
          .http()
          .patch('/api/v1/notes')
          .set(alice.auth)
          .send({ noteId, title: `Changed${NUL}` }),
      '/body/title',
    );
    expect((await h.http().get('/api/v1/notes').query({ noteId }).set(alice.auth).expect(200)).body.note.title).toBe('Kept');
  });
});

describe('NUL in a query or path parameter is a 400 naming it', () => {
  test('a record id in the query', async () => {
    await expectRefused(
      () =>
        h
          .http()
          .get('/api/v1/notes')
          .query({ noteId: `n${NUL}` })
          .set(alice.auth),
      '/query/noteId',
    );
  });

  test('audit filters, as an admin', async () => {
    await expectRefused(
      () =>
        h
          .http()
          .get('/api/v1/admin/audit')
          .query({ actorUserId: `a${NUL}` })
          .set(admin.auth),
      '/query/actorUserId',
    );
    await expectRefused(() => h.http().get('/api/v1/admin/audit/export').query({ action: NUL }).set(admin.auth), '/query/action');
  });

  test('a path parameter', async () => {
    await expectRefused(() => h.http().get('/api/v1/files/f%00/content').set(alice.auth), '/path/fileId');
  });

  test('files/search-text: the query, and the file and project filters', async () => {
    await expectRefused(
      () =>
        h
          .http()
          .post('/api/v1/files/search-text')
          .set(alice.auth)
          .send({ query: `revenue${NUL}` }),
      '/body/query',
    );
    await expectRefused(
      () =>
        h
          .http()
          .post('/api/v1/files/search-text')
          .set(alice.auth)
          .send({ query: 'q', fileId: `f${NUL}` }),
      '/body/fileId',
    );
    await expectRefused(
      () =>
        h
          .http()
          .post('/api/v1/files/search-text')
          .set(alice.auth)
          .send({ query: 'q', projectId: `${NUL}` }),
      '/body/projectId',
    );
  });

  test('files/share: the file id and each user id to add or remove', async () => {
    const folder = await h.http().post('/api/v1/files').set(alice.auth).send({ name: 'Shared', kind: 'folder' }).expect(200);
    const fileId = folder.body.file.fileId as string;
    await expectRefused(
      () =>
        h
          .http()
          .patch('/api/v1/files/share')
          .set(alice.auth)
          .send({ fileId: `${fileId}${NUL}`, add: ['bob'] }),
      '/body/fileId',
    );
    await expectRefused(
      () =>
        h
          .http()
          .patch('/api/v1/files/share')
          .set(alice.auth)
          .send({ fileId, add: ['bob', `carol${NUL}`] }),
      '/body/add/1',
    );
    await expectRefused(
      () =>
        h
          .http()
          .patch('/api/v1/files/share')
          .set(alice.auth)
          .send({ fileId, remove: [`${NUL}dave`] }),
      '/body/remove/0',
    );
  });

  test('userId on admin usage: the GET query and the POST body', async () => {
    await expectRefused(
      () =>
        h
          .http()
          .get('/api/v1/admin/usage')
          .query({ userId: `bob${NUL}` })
          .set(admin.auth),
      '/query/userId',
    );
    await expectRefused(
      () =>
        h
          .http()
          .post('/api/v1/admin/usage')
          .set(admin.auth)
          .send({ userId: `bob${NUL}`, amountCents: 100, reason: 'credit' }),
      '/body/userId',
    );
    await expectRefused(
      () =>
        h
          .http()
          .post('/api/v1/admin/usage')
          .set(admin.auth)
          .set('content-type', 'application/json')
          .send('{"userId":"bob\\udc00","amountCents":100}'),
      '/body/userId',
      refusedSurrogate,
    );
  });

  test('unauthenticated, it is still a 401 first', async () => {
    expect((await h.http().post('/api/v1/notes').send({ title: NUL })).status).toBe(401);
  });
});

describe('lone UTF-16 surrogates are refused; other control characters are text', () => {
  test('a lone surrogate in a body field, escaped in the JSON', async () => {
    const raw = '{"title":"a\\ud800b"}';
    await expectRefused(
      () => h.http().post('/api/v1/notes').set(alice.auth).set('content-type', 'application/json').send(raw),
      '/body/title',
      refusedSurrogate,
    );
    const low = '{"name":"\\udfff"}';
    await expectRefused(
      () => h.http().post('/api/v1/projects').set(alice.auth).set('content-type', 'application/json').send(low),
      '/body/name',
      refusedSurrogate,
    );
  });

  test('in a URL, the bytes a lone surrogate would have are not UTF-8: refused in the path, U+FFFD in the query', async () => {
    const path = await h.http().get('/api/v1/files/%ED%A0%80/content').set(alice.auth);
    expect({ status: path.status, code: path.body.code }).toEqual({ status: 400, code: 'invalid_request' });
    const query = await h.http().get('/api/v1/admin/audit?actorUserId=%ED%A0%80').set(admin.auth);
    expect(query.status).toBe(200);
  });

  test('a pair, other control characters and non-BMP text are kept as they are', async () => {
    const title = `tab\there\u0001\u001f\u007f \ud83d\ude00 é`;
    const res = await h.http().post('/api/v1/notes').set(alice.auth).send({ title, content: 'line\r\nbreak' }).expect(200);
    expect(res.body.note.title).toBe(title);
    const read = await h.http().get('/api/v1/notes').query({ noteId: res.body.note.noteId }).set(alice.auth).expect(200);
    expect(read.body.note).toMatchObject({ title, content: 'line\r\nbreak' });
  });
});

/** Sends `head` (bytes, as a client can put them on the wire) on a raw connection; the answer once the server closes it. */
function rawExchange(head: Buffer): Promise<{ status: number; body: Record<string, unknown> }> {
  const { port } = new URL(h.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const [top = '', ...rest] = Buffer.concat(chunks).toString('latin1').split('\r\n\r\n');
      resolve({ status: Number(top.split(' ')[1]), body: JSON.parse(rest.join('\r\n\r\n')) as Record<string, unknown> });
    });
    socket.on('connect', () => socket.write(head));
  });
}

describe('a header that reaches the database (Idempotency-Key, stored with the remembered response)', () => {
  /** A create with `key` (raw bytes) as its Idempotency-Key. `Connection: close` so that the server ends the exchange. */
  const createWithKey = (key: Buffer) => {
    const body = '{"title":"keyed"}';
    const head = `POST /api/v1/notes HTTP/1.1\r\nHost: svc\r\nConnection: close\r\nAuthorization: ${alice.auth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nIdempotency-Key: `;
    return rawExchange(Buffer.concat([Buffer.from(head), key, Buffer.from(`\r\n\r\n${body}`)]));
  };

  // NUL, the other C0 controls (but tab) and DEL cannot reach the service at all: Node's HTTP parser
  // refuses the request before any handler (the header is never read, let alone stored). What a
  // client can send is that refusal, which must still be the JSON 400 of the catalogue.
  test.each([
    ['NUL', [0x00]],
    ['a C0 control (US)', [0x1f]],
    ['DEL', [0x7f]],
  ])('%s: refused by the HTTP parser as a JSON 400 invalid_request, nothing stored', async (_name, bytes) => {
    const before = await rowCounts();
    const answer = await createWithKey(Buffer.from([0x6b, ...bytes, 0x6b]));
    expect(answer).toMatchObject({ status: 400, body: { code: 'invalid_request', error: expect.stringContaining('not valid HTTP') } });
    expect(await rowCounts()).toEqual(before);
  });

  // A header's bytes are Latin-1 to Node, so a lone surrogate cannot arrive as one: its UTF-8 form
  // (ED A0 80) and other bytes over 0x7F do reach the service, as the characters í, U+00A0, U+0080.
  test.each([
    ['the UTF-8 bytes of a lone surrogate', [0xed, 0xa0, 0x80]],
    ['a byte over 0x7F', [0xe9]],
  ])('%s: 400 invalid_request naming the header, nothing stored', async (_name, bytes) => {
    const before = await rowCounts();
    const answer = await createWithKey(Buffer.from([0x6b, ...bytes, 0x6b]));
    expect(answer).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    expect(answer.body.details).toEqual([{ path: '/headers/idempotency-key', message: expect.stringContaining('must match pattern') }]);
    expect(await rowCounts()).toEqual(before);
  });
});
