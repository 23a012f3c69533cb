import fs from 'node:fs';
import path from 'node:path';
import { breakingChanges, type Document, type Schema } from '../../scripts/check-compat';

/** A small published document: one list operation and one create operation. */
function published(): Document {
  return {
    paths: {
      '/api/v1/notes': {
        get: {
          parameters: [
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } },
            { $ref: '#/components/parameters/Cursor' },
          ],
          responses: {
            '200': {
              description: 'ok',
              headers: { ETag: { schema: { type: 'string' } } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/NoteList' } } },
            },
            '404': { $ref: '#/components/responses/NotFound' },
          },
        },
        post: {
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/NoteCreate' } } },
          },
          responses: { '200': { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/Note' } } } } },
        },
      },
    },
    components: {
      parameters: { Cursor: { name: 'cursor', in: 'query', schema: { type: 'string' } } },
      responses: { NotFound: { description: 'no', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } },
      schemas: {
        Error: { type: 'object', required: ['error', 'code'], properties: { error: { type: 'string' }, code: { type: 'string' } } },
        Note: {
          type: 'object',
          required: ['id', 'title', 'status'],
          properties: {
            id: { type: 'string' },
            title: { type: 'string' },
            pinned: { type: 'boolean' },
            score: { type: 'number' },
            status: { type: 'string', enum: ['draft', 'final'] },
            kind: { type: 'string', enum: ['a', 'b'], description: 'Clients must tolerate new values.' },
            tags: { type: 'array', items: { type: 'string' } },
          },
        },
        NoteList: {
          type: 'object',
          required: ['notes'],
          properties: { notes: { type: 'array', items: { $ref: '#/components/schemas/Note' } } },
        },
        NoteCreate: {
          type: 'object',
          additionalProperties: false,
          required: ['title'],
          properties: {
            title: { type: 'string', maxLength: 200 },
            color: { type: 'string', enum: ['red', 'blue'] },
            count: { type: 'integer' },
            parentId: { type: 'string', nullable: true },
          },
        },
      },
    },
  };
}

type Edit = (doc: Document) => void;
const schemas = (doc: Document) => doc.components!.schemas as Record<string, Schema>;
const notesGet = (doc: Document) =>
  doc.paths!['/api/v1/notes']!.get as { parameters: unknown[]; responses: Record<string, Record<string, unknown>> };
const notesPost = (doc: Document) => doc.paths!['/api/v1/notes']!.post as { requestBody: { required: boolean } };

function changed(edit: Edit): string[] {
  const doc = published();
  edit(doc);
  return breakingChanges(published(), doc);
}

describe('the compatibility check', () => {
  test('finds nothing in an unchanged document', () => {
    expect(breakingChanges(published(), published())).toEqual([]);
  });

  test.each<[string, Edit]>([
    ['a new operation', (d) => void (d.paths!['/api/v1/projects'] = { get: { responses: { '200': { description: 'ok' } } } })],
    ['a new optional response field', (d) => void (schemas(d).Note!.properties!.color = { type: 'string' })],
    ['a new optional request field', (d) => void (schemas(d).NoteCreate!.properties!.pinned = { type: 'boolean' })],
    ['a new response status', (d) => void (notesGet(d).responses['429'] = { description: 'slow down' })],
    ['a new response header', (d) => void (notesGet(d).responses['200']!.headers = { ETag: {}, 'X-Request-Id': {} })],
    ['a new request enum value', (d) => void schemas(d).NoteCreate!.properties!.color!.enum!.push('green')],
    ['a new value of a response enum that says clients tolerate them', (d) => void schemas(d).Note!.properties!.kind!.enum!.push('c')],
    ['a request integer widened to number', (d) => void (schemas(d).NoteCreate!.properties!.count!.type = 'number')],
    ['a response number narrowed to integer', (d) => void (schemas(d).Note!.properties!.score!.type = 'integer')],
    ['a longer request maxLength', (d) => void (schemas(d).NoteCreate!.properties!.title!.maxLength = 500)],
    ['a response field that becomes required', (d) => void schemas(d).Note!.required!.push('pinned')],
    ['an enum added to a response string', (d) => void (schemas(d).Note!.properties!.title!.enum = ['x'])],
    [
      'a response schema split into discriminated variants that keep every field',
      (d) => {
        const note = schemas(d).Note!;
        schemas(d).NoteDraft = { allOf: [{ ...note, properties: { ...note.properties, status: { type: 'string', enum: ['draft'] } } }] };
        schemas(d).NoteFinal = { allOf: [{ ...note, properties: { ...note.properties, status: { type: 'string', enum: ['final'] } } }] };
        schemas(d).Note = {
          oneOf: [{ $ref: '#/components/schemas/NoteDraft' }, { $ref: '#/components/schemas/NoteFinal' }],
          discriminator: { propertyName: 'status' },
        };
      },
    ],
  ])('allows %s', (_name, edit) => {
    expect(changed(edit)).toEqual([]);
  });

  test.each<[string, Edit, string]>([
    ['a removed operation', (d) => void delete d.paths!['/api/v1/notes']!.post, 'POST /api/v1/notes: operation removed'],
    ['a removed response status', (d) => void delete notesGet(d).responses['404'], 'GET /api/v1/notes 404: response status removed'],
    [
      'a changed status',
      (d) => {
        const post = d.paths!['/api/v1/notes']!.post as { responses: Record<string, unknown> };
        post.responses = { '201': post.responses['200'] };
      },
      'POST /api/v1/notes 200: response status removed',
    ],
    [
      'a removed response field',
      (d) => void delete schemas(d).Note!.properties!.title,
      'GET /api/v1/notes 200 application/json body.notes[].title: response field removed',
    ],
    [
      'a response field no longer required',
      (d) => void (schemas(d).Note!.required = ['id', 'status']),
      'POST /api/v1/notes 200 application/json body.title: response field no longer always present',
    ],
    [
      'a removed field of a shared error response',
      (d) => void delete schemas(d).Error!.properties!.code,
      'GET /api/v1/notes 404 application/json body.code: response field removed',
    ],
    [
      'a removed response header',
      (d) => void (notesGet(d).responses['200']!.headers = {}),
      'GET /api/v1/notes 200: response header ETag removed',
    ],
    [
      'a new required request field',
      (d) => void schemas(d).NoteCreate!.required!.push('color'),
      'POST /api/v1/notes request application/json body.color: new required request field',
    ],
    [
      'a new required request field that is new too',
      (d) => {
        schemas(d).NoteCreate!.properties!.projectId = { type: 'string' };
        schemas(d).NoteCreate!.required!.push('projectId');
      },
      'POST /api/v1/notes request application/json body.projectId: new required request field',
    ],
    [
      'a removed request field that is now refused',
      (d) => void delete schemas(d).NoteCreate!.properties!.color,
      'POST /api/v1/notes request application/json body.color: request field removed (it would now be refused)',
    ],
    [
      'a new required query parameter',
      (d) => void notesGet(d).parameters.push({ name: 'projectId', in: 'query', required: true, schema: { type: 'string' } }),
      'GET /api/v1/notes: query parameter projectId is new and required',
    ],
    ['a removed query parameter', (d) => void notesGet(d).parameters.splice(1, 1), 'GET /api/v1/notes: query parameter cursor removed'],
    [
      'a narrowed request type',
      (d) => void (schemas(d).NoteCreate!.properties!.title!.type = 'integer'),
      'POST /api/v1/notes request application/json body.title: type narrowed from string to integer',
    ],
    [
      'a changed response type',
      (d) => void (schemas(d).Note!.properties!.pinned!.type = 'string'),
      'POST /api/v1/notes 200 application/json body.pinned: type changed from boolean to string',
    ],
    [
      'a removed request enum value',
      (d) => void (schemas(d).NoteCreate!.properties!.color!.enum = ['red']),
      'POST /api/v1/notes request application/json body.color: enum values removed: "blue"',
    ],
    [
      'an enum added to a request string',
      (d) => void (schemas(d).NoteCreate!.properties!.title!.enum = ['x']),
      'POST /api/v1/notes request application/json body.title: enum added ("x")',
    ],
    [
      'a new value of a closed response enum',
      (d) => void schemas(d).Note!.properties!.status!.enum!.push('archived'),
      'POST /api/v1/notes 200 application/json body.status: enum values added: "archived" (the published schema does not say clients must tolerate new values)',
    ],
    [
      'a shorter request maxLength',
      (d) => void (schemas(d).NoteCreate!.properties!.title!.maxLength = 100),
      'POST /api/v1/notes request application/json body.title: maxLength narrowed from 200 to 100',
    ],
    [
      'a tighter query maximum',
      (d) => void ((notesGet(d).parameters[0] as { schema: Schema }).schema.maximum = 100),
      'GET /api/v1/notes query parameter limit value: maximum narrowed from 200 to 100',
    ],
    [
      'a request field that no longer accepts null',
      (d) => void delete schemas(d).NoteCreate!.properties!.parentId!.nullable,
      'POST /api/v1/notes request application/json body.parentId: no longer accepts null',
    ],
    [
      'a response field that may now be null',
      (d) => void (schemas(d).Note!.properties!.title!.nullable = true),
      'POST /api/v1/notes 200 application/json body.title: may now be null',
    ],
    [
      'a removed response media type',
      (d) => void (notesGet(d).responses['200']!.content = { 'text/csv': {} }),
      'GET /api/v1/notes 200: response media type application/json removed',
    ],
  ])('reports %s', (_name, edit, expected) => {
    expect(changed(edit)).toContain(expected);
  });

  test('allows a new variant of a response union only where the published union says clients tolerate new ones', () => {
    const withUnion = (variants: string[], tolerant: boolean) => {
      const d = published();
      schemas(d).Event = {
        ...(tolerant ? { description: 'Clients must tolerate new event types.' } : {}),
        oneOf: variants.map((v) => ({ $ref: `#/components/schemas/Event${v}` })),
        discriminator: { propertyName: 'type' },
      };
      for (const v of variants) schemas(d)[`Event${v}`] = { type: 'object', properties: { type: { type: 'string', enum: [v] } } };
      schemas(d).Note!.properties!.event = { $ref: '#/components/schemas/Event' };
      return d;
    };
    expect(breakingChanges(withUnion(['a'], true), withUnion(['a', 'b'], true))).toEqual([]);
    expect(breakingChanges(withUnion(['a'], false), withUnion(['a', 'b'], false))).toContain(
      'POST /api/v1/notes 200 application/json body.event: response variant type=b added',
    );
  });

  test('reports a request body that becomes required', () => {
    const old = published();
    notesPost(old).requestBody.required = false;
    expect(breakingChanges(old, published())).toEqual(['POST /api/v1/notes: request body is now required']);
  });

  test('reports a response field removed from the real published 1.0.0 document', () => {
    const file = path.join(__dirname, '..', '..', 'openapi', 'published', '1.0.0.json');
    const doc = JSON.parse(fs.readFileSync(file, 'utf8')) as Document;
    const edited = JSON.parse(JSON.stringify(doc)) as Document;
    delete (edited.components!.schemas as Record<string, Schema>).Note!.properties!.pinned;
    const problems = breakingChanges(doc, edited);
    expect(problems).toContain('GET /api/v1/notes 200 application/json body.notes[].pinned: response field removed');
    expect(breakingChanges(doc, doc)).toEqual([]);
  });
});
