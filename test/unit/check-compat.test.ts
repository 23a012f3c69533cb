import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { breakingChanges, markerProblems, run, type Document, type Schema } from '../../scripts/check-compat';

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
              headers: {
                ETag: { schema: { type: 'string' } },
                'X-Cache': { required: true, schema: { type: 'string', enum: ['hit', 'miss'] } },
              },
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
            kind: { type: 'string', enum: ['a', 'b'], 'x-enum-extensible': true, description: 'Clients must tolerate new values.' },
            level: { type: 'string', enum: ['low', 'high'], description: 'Clients must tolerate new values.' },
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
    [
      'a new response header',
      (d) => void ((notesGet(d).responses['200']!.headers as Record<string, unknown>)['X-Request-Id'] = { schema: { type: 'string' } }),
    ],
    [
      'a response header that becomes always sent',
      (d) => void ((notesGet(d).responses['200']!.headers as Record<string, { required?: boolean }>).ETag!.required = true),
    ],
    ['a new request enum value', (d) => void schemas(d).NoteCreate!.properties!.color!.enum!.push('green')],
    ['a new value of a response enum marked x-enum-extensible', (d) => void schemas(d).Note!.properties!.kind!.enum!.push('c')],
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
      'a response header no longer always sent',
      (d) => void delete (notesGet(d).responses['200']!.headers as Record<string, { required?: boolean }>)['X-Cache']!.required,
      'GET /api/v1/notes 200: response header X-Cache no longer always sent',
    ],
    [
      'a new value of a response header enum',
      (d) => void (notesGet(d).responses['200']!.headers as Record<string, { schema: Schema }>)['X-Cache']!.schema.enum!.push('stale'),
      'GET /api/v1/notes 200 response header X-Cache value: enum values added: "stale" (the released enum is not marked x-enum-extensible)',
    ],
    [
      'a changed response header type',
      (d) => void ((notesGet(d).responses['200']!.headers as Record<string, { schema: Schema }>).ETag!.schema.type = 'integer'),
      'GET /api/v1/notes 200 response header ETag value: type changed from string to integer',
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
      'POST /api/v1/notes 200 application/json body.status: enum values added: "archived" (the released enum is not marked x-enum-extensible)',
    ],
    [
      'a new value of a response enum whose description promises tolerance but that is not marked (the document uses markers)',
      (d) => void schemas(d).Note!.properties!.level!.enum!.push('medium'),
      'POST /api/v1/notes 200 application/json body.level: enum values added: "medium" (the released enum is not marked x-enum-extensible)',
    ],
    [
      'a new value of a response enum marked only in the newer document',
      (d) => {
        schemas(d).Note!.properties!.status!['x-enum-extensible'] = true;
        schemas(d).Note!.properties!.status!.enum!.push('archived');
      },
      'POST /api/v1/notes 200 application/json body.status: enum values added: "archived" (the released enum is not marked x-enum-extensible)',
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

  test('compares the variants of a union by reference when their discriminator value changes or goes', () => {
    const withUnion = (edit: (variant: Schema) => void = () => {}) => {
      const d = published();
      schemas(d).Event = {
        description: 'Clients must tolerate new event types.',
        oneOf: [{ $ref: '#/components/schemas/EventA' }],
        discriminator: { propertyName: 'type' },
      };
      schemas(d).EventA = {
        type: 'object',
        required: ['type', 'at'],
        properties: { type: { type: 'string', enum: ['a'] }, at: { type: 'integer' } },
      };
      edit(schemas(d).EventA!);
      schemas(d).Note!.properties!.event = { $ref: '#/components/schemas/Event' };
      return d;
    };
    const at = 'POST /api/v1/notes 200 application/json body.event';
    expect(
      breakingChanges(
        withUnion(),
        withUnion((v) => void delete v.properties!.type),
      ),
    ).toContain(`${at}.type: response field removed`);
    expect(
      breakingChanges(
        withUnion(),
        withUnion((v) => void v.properties!.type!.enum!.push('b')),
      ),
    ).toContain(`${at}.type: enum values added: "b" (the released enum is not marked x-enum-extensible)`);
    expect(
      breakingChanges(
        withUnion(),
        withUnion((v) => void (v.properties!.type!.enum = ['b'])),
      ),
    ).toContain(`${at}.type: enum values added: "b" (the released enum is not marked x-enum-extensible)`);
  });

  test('reads which enums are open from their prose in a released document older than the marker', () => {
    const legacy = published();
    delete schemas(legacy).Note!.properties!.kind!['x-enum-extensible'];
    const newer = published();
    schemas(newer).Note!.properties!.level!.enum!.push('medium');
    schemas(newer).Note!.properties!.status!.enum!.push('archived');
    expect(breakingChanges(legacy, newer)).toEqual([
      'GET /api/v1/notes 200 application/json body.notes[].status: enum values added: "archived" (the released enum is not marked x-enum-extensible)',
      'POST /api/v1/notes 200 application/json body.status: enum values added: "archived" (the released enum is not marked x-enum-extensible)',
    ]);
  });

  test('requires the marker on every enum whose description promises tolerance, and only on enums', () => {
    const doc = published();
    expect(markerProblems(doc)).toEqual([
      '#/components/schemas/Note/properties/level: the description says clients must tolerate new values, but the enum is not marked x-enum-extensible: true',
    ]);
    schemas(doc).Note!.properties!.level!['x-enum-extensible'] = true;
    schemas(doc).Note!.properties!.title!['x-enum-extensible'] = true;
    (schemas(doc).Note!.properties!.status as Record<string, unknown>)['x-enum-extensible'] = 'yes';
    expect(markerProblems(doc)).toEqual([
      '#/components/schemas/Note/properties/title: x-enum-extensible on a schema without an enum',
      '#/components/schemas/Note/properties/status: x-enum-extensible must be true (or absent)',
    ]);
  });

  test('allows a response media range to narrow to the types within it, not a request one', () => {
    const withContent = (response: string[], request: string[]) => {
      const d = published();
      const binary = { schema: { type: 'string', format: 'binary' } };
      notesGet(d).responses['200']!.content = Object.fromEntries(response.map((t) => [t, binary]));
      (notesPost(d) as unknown as { requestBody: { content: unknown } }).requestBody.content = Object.fromEntries(
        request.map((t) => [t, binary]),
      );
      return d;
    };
    expect(breakingChanges(withContent(['*/*'], ['*/*']), withContent(['image/png', 'text/plain'], ['*/*']))).toEqual([]);
    expect(breakingChanges(withContent(['image/*'], ['*/*']), withContent(['image/png'], ['*/*']))).toEqual([]);
    expect(breakingChanges(withContent(['image/*'], ['*/*']), withContent(['text/plain'], ['*/*']))).toEqual([
      'GET /api/v1/notes 200: response media type image/* removed',
    ]);
    expect(breakingChanges(withContent(['*/*'], ['*/*']), withContent(['*/*'], ['application/octet-stream']))).toEqual([
      'POST /api/v1/notes: request media type */* removed',
    ]);
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

/** The refreshed 1.0.0 snapshot: every operation served as of 1.0.0. */
function snapshot(): Document {
  return JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'openapi', 'published', '1.0.0.json'), 'utf8')) as Document;
}

describe('the published 1.0.0 snapshot', () => {
  const released = snapshot();
  const edited = (edit: (doc: Document, schemas: Record<string, Schema>) => void) => {
    const doc = snapshot();
    edit(doc, doc.components!.schemas as Record<string, Schema>);
    return breakingChanges(released, doc);
  };
  const operation = (doc: Document, route: string, method: string) =>
    doc.paths![route]![method] as { parameters: { name?: string }[]; responses: Record<string, { headers: Record<string, unknown> }> };

  test('is compatible with itself and marks its open enums', () => {
    expect(breakingChanges(released, released)).toEqual([]);
    expect(markerProblems(released)).toEqual([]);
  });

  // Five areas the first snapshot lacked (it was written before them): a removal from each fails.
  test.each<[string, (doc: Document, schemas: Record<string, Schema>) => void, string]>([
    ['settings: an operation', (d) => void delete d.paths!['/api/v1/settings']!.patch, 'PATCH /api/v1/settings: operation removed'],
    [
      'onboarding: a response field',
      (_d, s) => void delete s.Onboarding!.properties!.completed,
      'GET /api/v1/onboarding 200 application/json body.onboarding.completed: response field removed',
    ],
    [
      'MCP servers: a response header',
      (d) => void delete operation(d, '/api/v1/mcp-servers', 'post').responses['200']!.headers['RateLimit-Remaining'],
      'POST /api/v1/mcp-servers 200: response header RateLimit-Remaining removed',
    ],
    [
      'model providers: a response field',
      (_d, s) => void delete s.ModelConnection!.properties!.lastError,
      'POST /api/v1/model-providers 200 application/json body.connection.lastError: response field removed',
    ],
    [
      'approvals: a query parameter',
      (d) => void operation(d, '/api/v1/approvals', 'get').parameters.splice(0, 1),
      'GET /api/v1/approvals: query parameter approvalId removed',
    ],
    [
      'approvals: a request field',
      (_d, s) => void delete s.ApprovalDecideRequest!.properties!.arguments,
      'POST /api/v1/approvals/decide request application/json body.arguments: request field removed (it would now be refused)',
    ],
  ])('fails when %s is removed', (_name, edit, expected) => {
    expect(edited(edit)).toContain(expected);
  });

  test('fails on a new value of a closed response enum, not of one marked extensible', () => {
    expect(edited((_d, s) => void s.Theme!.enum!.push('high_contrast'))).toContain(
      'GET /api/v1/settings 200 application/json body.settings.theme: enum values added: "high_contrast" (the released enum is not marked x-enum-extensible)',
    );
    expect(
      edited((d) => void (d.components!.headers as Record<string, { schema: Schema }>).XContentTypeOptions!.schema.enum!.push('none')),
    ).toContain(
      'GET /api/v1/files/{fileId}/content 200 response header X-Content-Type-Options value: enum values added: "none" (the released enum is not marked x-enum-extensible)',
    );
    expect(edited((_d, s) => void s.McpTransport!.enum!.push('websocket'))).toEqual([]);
    expect(edited((_d, s) => void s.WebhookEventType!.enum!.push('note.created'))).toEqual([]);
  });
});

describe('make compat against the last released document in git', () => {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: 'compat',
    GIT_AUTHOR_EMAIL: 'compat@example.com',
    GIT_COMMITTER_NAME: 'compat',
    GIT_COMMITTER_EMAIL: 'compat@example.com',
  };
  delete env.COMPAT_BASE;
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

  const git = (dir: string, ...args: string[]) => execFileSync('git', args, { cwd: dir, env, stdio: 'pipe', encoding: 'utf8' }).trim();
  /** A repository on `main` whose document serves GET /api/v1/notes with these response fields. */
  function repo(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'compat-git-'));
    dirs.push(dir);
    git(dir, 'init', '-q', '-b', 'main');
    return dir;
  }
  function write(dir: string, fields: string[]): void {
    fs.mkdirSync(path.join(dir, 'openapi'), { recursive: true });
    const properties = Object.fromEntries(fields.map((f) => [f, { type: 'string' }]));
    const doc = {
      openapi: '3.0.3',
      info: { title: 'compat', version: '1.0.0' },
      paths: {
        '/api/v1/notes': {
          get: {
            operationId: 'listNotes',
            responses: { '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object', properties } } } } },
          },
        },
      },
    };
    fs.writeFileSync(path.join(dir, 'openapi', 'openapi.yaml'), JSON.stringify(doc, null, 2)); // JSON is YAML
  }
  function commit(dir: string, fields: string[], message = fields.join(' ')): string {
    write(dir, fields);
    git(dir, 'add', '-A');
    git(dir, 'commit', '-q', '-m', message);
    return git(dir, 'rev-parse', '--short', 'HEAD');
  }
  function compat(dir: string, extra: Record<string, string> = {}) {
    const out: string[] = [];
    const err: string[] = [];
    const status = run(dir, { ...env, ...extra }, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { status, out: out.join('\n'), err: err.join('\n') };
  }
  const removed = (field: string) => `GET /api/v1/notes 200 application/json body.${field}: response field removed`;

  test('on main, a clean tree is compared with HEAD~1 and uncommitted changes with HEAD', () => {
    const dir = repo();
    const first = commit(dir, ['id', 'title']);
    const second = commit(dir, ['id', 'title', 'pinned']);
    expect(compat(dir)).toMatchObject({
      status: 0,
      out: expect.stringContaining(`compatible with ${first} (HEAD~1, main's previous commit`),
    });

    write(dir, ['id', 'pinned']);
    const dirty = compat(dir);
    expect(dirty.status).toBe(1);
    expect(dirty.err).toContain(`1 breaking change(s) against ${second} (HEAD, the last commit: openapi/ has uncommitted changes):`);
    expect(dirty.err).toContain(removed('title'));

    git(dir, 'commit', '-q', '-am', 'title removed');
    const committed = compat(dir);
    expect(committed.status).toBe(1);
    expect(committed.err).toContain(`against ${second} (HEAD~1, main's previous commit`);
    expect(committed.err).toContain(removed('title'));
  });

  test('on a branch, every commit since it left main is compared together', () => {
    const dir = repo();
    const base = commit(dir, ['id', 'title']);
    git(dir, 'checkout', '-q', '-b', 'topic');
    commit(dir, ['id']);
    commit(dir, ['id', 'pinned']); // HEAD~1 lacks `title` too: only the branch point shows its removal
    const result = compat(dir);
    expect(result.status).toBe(1);
    expect(result.err).toContain(`against ${base} (where this branch leaves main):`);
    expect(result.err).toContain(removed('title'));
  });

  test('a release tag api-v<version> is the baseline: what came after it may change until the next release', () => {
    const dir = repo();
    const released = commit(dir, ['id']);
    git(dir, 'tag', '-a', 'api-v1.0.0', '-m', '1.0.0');
    commit(dir, ['id', 'draft']);
    commit(dir, ['id', 'final']); // `draft` was never released
    expect(compat(dir)).toMatchObject({
      status: 0,
      out: expect.stringContaining(`compatible with api-v1.0.0 (${released}, the last release tag)`),
    });

    const next = git(dir, 'rev-parse', '--short', 'HEAD');
    git(dir, 'tag', 'api-v1.1.0');
    // The tag on HEAD is what is being checked: it is compared with the release before it.
    expect(compat(dir).out).toContain('compatible with api-v1.0.0');
    write(dir, ['id']);
    const dirty = compat(dir);
    expect(dirty.err).toContain(`against api-v1.1.0 (${next}, the last release tag):`);
    expect(dirty.err).toContain(removed('final'));
  });

  test('a shallow clone says what it could not compare with and fails, unless told to skip it', () => {
    const origin = repo();
    commit(origin, ['id', 'title']);
    commit(origin, ['id']);
    const clone = fs.mkdtempSync(path.join(os.tmpdir(), 'compat-shallow-'));
    dirs.push(clone);
    git(clone, 'clone', '-q', '--depth', '1', `file://${origin}`, '.');
    const result = compat(clone);
    expect(result.status).toBe(1);
    expect(result.err).toContain(
      "NOT compared with the last released document in git: HEAD~1, main's previous commit, is not in this shallow clone.",
    );
    expect(result.err).not.toContain('a breaking change needs /api/v2');
    expect(compat(clone, { COMPAT_BASE: 'none' })).toMatchObject({
      status: 0,
      out: expect.stringContaining('not compared with the last released document in git (COMPAT_BASE=none): only with openapi/published/'),
    });
    git(clone, 'fetch', '-q', '--deepen=1');
    expect(compat(clone).err).toContain(removed('title'));
  });

  test('COMPAT_BASE names the commit to compare with; a first commit has none', () => {
    const dir = repo();
    const first = commit(dir, ['id', 'title']);
    expect(compat(dir)).toMatchObject({
      status: 0,
      out: expect.stringContaining('no earlier document in git to compare with: HEAD is the first commit'),
    });
    commit(dir, ['id', 'title', 'pinned']);
    commit(dir, ['id', 'pinned']);
    expect(compat(dir, { COMPAT_BASE: first }).err).toContain(`against ${first} (COMPAT_BASE=${first}):`);
    expect(compat(dir, { COMPAT_BASE: 'no-such-commit' }).err).toContain('COMPAT_BASE=no-such-commit is not a commit in this clone');
  });

  test('a change listed in openapi/published/accepted.yaml, with its reason, does not fail', () => {
    const dir = repo();
    commit(dir, ['id', 'title']);
    write(dir, ['id']);
    const list = (changes: string[]) =>
      fs.writeFileSync(
        path.join(dir, 'openapi', 'published', 'accepted.yaml'),
        changes.map((c) => `- change: '${c}'\n  why: never served\n`).join(''),
      );
    fs.mkdirSync(path.join(dir, 'openapi', 'published'));
    list([removed('title'), removed('gone')]);
    const result = compat(dir);
    expect(result.status).toBe(0);
    expect(result.out).toContain(`: ${removed('title')} (openapi/published/accepted.yaml: never served)`);
    expect(result.out).toContain(`openapi/published/accepted.yaml lists a change no comparison finds (remove it): ${removed('gone')}`);
    fs.writeFileSync(path.join(dir, 'openapi', 'published', 'accepted.yaml'), `- change: '${removed('title')}'\n`);
    expect(() => compat(dir)).toThrow('accepted.yaml entry 1: needs `change`');
  });

  test("deleting /api/v1/settings from the project's document fails against the snapshot and the previous commit", () => {
    const dir = repo();
    fs.cpSync(path.join(__dirname, '..', '..', 'openapi'), path.join(dir, 'openapi'), { recursive: true });
    git(dir, 'add', '-A');
    git(dir, 'commit', '-q', '-m', 'the document');
    const index = path.join(dir, 'openapi', 'openapi.yaml');
    const text = fs.readFileSync(index, 'utf8');
    expect(text).toContain('  /api/v1/settings:\n    $ref: paths/settings.yaml\n');
    fs.writeFileSync(index, text.replace('  /api/v1/settings:\n    $ref: paths/settings.yaml\n', ''));
    git(dir, 'commit', '-q', '-am', 'settings removed');
    const result = compat(dir);
    expect(result.status).toBe(1);
    expect(result.err).toMatch(
      /breaking change\(s\) against the published 1\.0\.0\.json:\n {2}- GET \/api\/v1\/settings: operation removed\n {2}- PATCH \/api\/v1\/settings: operation removed/,
    );
    expect(result.err).toMatch(
      /breaking change\(s\) against \w+ \(HEAD~1, main's previous commit[^\n]*\n {2}- GET \/api\/v1\/settings: operation removed/,
    );
  });
});
