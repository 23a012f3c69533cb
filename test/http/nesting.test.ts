import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { type Harness, startHarness, type TestUser, userNamed, tableRowCounts, stopBackgroundWork } from '../helpers/harness';
import { errorShapeOf, openAiParam } from '../../src/http/error-shape';

// A body nested deeper than the nesting limit is refused by the text guard, before anything that
// recurses over the body (the validator, the idempotency key's canonical JSON, serialisation):
// 400 invalid_request naming the first container past the limit, whatever the operation.
const LIMIT = 64;
const tooDeep = `must not be nested more than ${LIMIT} levels deep (the nesting limit)`;

interface Operation {
  method: 'post' | 'put' | 'patch' | 'delete';
  path: string;
  asAdmin: boolean;
}

const doc = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../generated/openapi.json'), 'utf8'));
const requestBodies = (doc.components.requestBodies ?? {}) as Record<string, { content: Record<string, unknown> }>;
/** Every operation of the document that takes a JSON body, path parameters filled with placeholders. */
const jsonOperations: Operation[] = Object.entries(doc.paths as Record<string, Record<string, Record<string, unknown>>>).flatMap(
  ([p, item]) =>
    (['post', 'put', 'patch', 'delete'] as const).flatMap((method) => {
      const operation = item[method] as
        { requestBody?: { $ref?: string; content?: Record<string, unknown> }; 'x-required-roles'?: string[] } | undefined;
      const body = operation?.requestBody?.$ref
        ? requestBodies[operation.requestBody.$ref.split('/').pop() as string]
        : operation?.requestBody;
      if (!body?.content?.['application/json']) return [];
      return [{ method, path: p.replace(/\{[^}]+\}/g, 'placeholder'), asAdmin: operation?.['x-required-roles'] !== undefined }];
    }),
);

/** `{"name":[[…1…]]}`, `levels` arrays deep. */
const nestedArrays = (levels: number) => `{"name":${'['.repeat(levels)}1${']'.repeat(levels)}}`;
/** `{"a":{"a":…1…}}`, `levels` objects deep (the body itself being the first). */
const nestedObjects = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

const rootId = `root-${randomUUID()}`;
let h: Harness;
let alice: TestUser;
let admin: TestUser;

beforeAll(async () => {
  // Every capability on, so that no operation is refused by its capability gate before the guard.
  h = await startHarness({ BOOTSTRAP_ADMIN_USER_IDS: rootId, CAPABILITY_BILLING: 'true' });
  await stopBackgroundWork(h);
  alice = await h.newUser('alice');
  admin = await userNamed(h, rootId);
});
afterAll(() => h?.close());

const rowCounts = () => tableRowCounts(h);

const send = (op: Operation, body: string) =>
  h
    .http()
    [op.method](op.path)
    .set((op.asAdmin ? admin : alice).auth)
    .set('content-type', 'application/json')
    .send(body);

test('the document has JSON operations to try', () => {
  expect(jsonOperations.length).toBeGreaterThan(50);
});

describe.each([
  ['arrays 5,000 levels deep', nestedArrays(5_000), `/body/name${'/0'.repeat(LIMIT - 1)}`],
  ['arrays 100,000 levels deep', nestedArrays(100_000), `/body/name${'/0'.repeat(LIMIT - 1)}`],
  ['objects 100,000 levels deep', nestedObjects(100_000), `/body${'/a'.repeat(LIMIT)}`],
])('a body of %s', (_name, body, deepest) => {
  test('is 400 invalid_request naming the first level past the limit on every JSON operation, and changes nothing', async () => {
    const before = await rowCounts();
    const answers: Array<{ operation: string; status: number; code: unknown; details: unknown }> = [];
    for (const op of jsonOperations) {
      const res = await send(op, body);
      // The OpenAI-compatible API answers in OpenAI's shape: the field as its `param`.
      const openAi = errorShapeOf(op.path) === 'openai';
      answers.push({
        operation: `${op.method.toUpperCase()} ${op.path}`,
        status: res.status,
        code: openAi ? res.body.error?.code : res.body.code,
        details: openAi ? res.body.error?.param : res.body.details,
      });
    }
    expect(answers).toEqual(
      jsonOperations.map((op) => ({
        operation: `${op.method.toUpperCase()} ${op.path}`,
        status: 400,
        code: 'invalid_request',
        details: errorShapeOf(op.path) === 'openai' ? openAiParam(deepest) : [{ path: deepest, message: tooDeep }],
      })),
    );
    expect(await rowCounts()).toEqual(before);
  });
});

describe('the limit itself', () => {
  /** A settings update whose free-form `ui` holds objects nested until the body is `levels` deep. */
  const uiNested = (levels: number) => `{"ui":${'{"a":'.repeat(levels - 2)}{}${'}'.repeat(levels - 2)}}`;

  test(`a body ${LIMIT} levels deep is taken, and stored as sent`, async () => {
    const res = await h
      .http()
      .patch('/api/v1/settings')
      .set(alice.auth)
      .set('content-type', 'application/json')
      .send(uiNested(LIMIT))
      .expect(200);
    expect(JSON.stringify({ ui: res.body.settings.ui })).toBe(uiNested(LIMIT));
  });

  test(`one level more is refused, naming the path`, async () => {
    const res = await h
      .http()
      .patch('/api/v1/settings')
      .set(alice.auth)
      .set('content-type', 'application/json')
      .send(uiNested(LIMIT + 1));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: `The request is nested more than ${LIMIT} levels deep.`,
      code: 'invalid_request',
      details: [{ path: `/body/ui${'/a'.repeat(LIMIT - 1)}`, message: tooDeep }],
    });
  });

  test('unstorable text and too deep a body are both named', async () => {
    const body = `{"title":"a\\u0000b","content":${'['.repeat(LIMIT)}1${']'.repeat(LIMIT)}}`;
    const res = await h.http().post('/api/v1/notes').set(alice.auth).set('content-type', 'application/json').send(body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: `The request holds text that cannot be stored and is nested more than ${LIMIT} levels deep.`,
      code: 'invalid_request',
      details: [
        { path: '/body/title', message: 'must not contain the NUL character (U+0000)' },
        { path: `/body/content${'/0'.repeat(LIMIT - 1)}`, message: tooDeep },
      ],
    });
  });
});
