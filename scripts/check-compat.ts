/**
 * `make compat`: fails when the document (openapi/, bundled) breaks what was already released.
 * `/api/v1` changes only additively (the document's "Versioning", docs/api.md "Compatibility").
 *
 * What it compares with (every comparison that applies runs; any breaking change fails):
 *   1. Each snapshot in openapi/published/ (`<version>.json`, the bundle as served when that
 *      version was released; 1.0.0.json holds every operation served as of 1.0.0).
 *   2. The last released document as git holds it (openapi/ at that commit, bundled the same way):
 *      - the newest release tag `api-v<major>.<minor>.<patch>` (e.g. `api-v1.0.0`, the document's
 *        `info.version`) reachable from HEAD; a tag on HEAD itself is passed over when the working
 *        tree's openapi/ equals HEAD (that release is what is being checked). Changes made since
 *        the tag are not released yet and may still be reworked.
 *      - with no such tag, every commit of main counts as released:
 *          - HEAD on main (CI checks a clean clone of main), openapi/ as committed: HEAD~1 (first
 *            parent), so the commit being checked is the change; openapi/ with uncommitted changes
 *            (openapi/published/ aside): HEAD, so the uncommitted edit is the change;
 *          - HEAD on another branch: the commit where it leaves main (`git merge-base HEAD main`),
 *            so every commit of the branch is checked together, not only the last one.
 *        `main` is the local branch, else `origin/main`; with neither, HEAD is taken to be on main.
 *      COMPAT_BASE=<rev> compares with that commit instead; COMPAT_BASE=none skips this comparison
 *      (and says so). When the baseline commit is not in the clone (a shallow clone, a tarball
 *      without .git), the guard says what it could not compare with and fails, after running the
 *      other comparisons: fetch more history (`git fetch --deepen=1`, `--unshallow`) or set
 *      COMPAT_BASE. A first commit, or a baseline without openapi/openapi.yaml, has nothing to
 *      compare with, which it says, and passes.
 *
 * The rules find what is not additive:
 *   - a removed operation, a removed response status, a removed response media type (a range, such
 *     as `image/*` or any type, may narrow to types within it) or header, a response header no
 *     longer always sent;
 *   - a removed response field, or one that is no longer always present;
 *   - a new required request field or parameter, a request body that becomes required, a removed
 *     query parameter or request field (unknown ones are refused);
 *   - a narrowed type or enum: in a request, a changed type, fewer enum values, a new enum, a
 *     tighter length, size or range, a new pattern, `nullable` dropped; in a response (bodies and
 *     header values), a changed type, `nullable` added, a new enum value unless the released
 *     schema is marked `x-enum-extensible: true` (clients must tolerate values they do not know),
 *     and new oneOf variants unless the released union's description says clients must tolerate
 *     new ones. Union variants are matched by discriminator value, else by reference.
 * `x-enum-extensible: true` sits beside `enum` (which stays, so the validator still checks what
 * the service sends). It is not Zalando's `x-extensible-enum`, a list of values that replaces
 * `enum`. A released document without any marker (older than the marker) is read by its prose
 * instead ("Clients must tolerate new values"). The current document must mark every enum whose
 * description says clients must tolerate new values, and mark nothing but enums.
 * A problem listed in openapi/published/accepted.yaml (`- change: <the line as reported>`, `why:`)
 * is printed as accepted and does not fail: corrections of the document to what the service already
 * did, reviewed like any change.
 * The rules read a bundled document (local `#/components/...` references only).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';

/** The extension that declares an enum open: clients tolerate values they do not know. */
export const EXTENSIBLE = 'x-enum-extensible';

/** The parts of an OpenAPI 3.0 document the rules read; everything else passes through untyped. */
export interface Schema {
  $ref?: string;
  type?: string;
  nullable?: boolean;
  enum?: unknown[];
  description?: string;
  'x-enum-extensible'?: boolean;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  allOf?: Schema[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  discriminator?: { propertyName: string; mapping?: Record<string, string> };
  readOnly?: boolean;
  writeOnly?: boolean;
  pattern?: string;
  [keyword: string]: unknown;
}
interface Parameter {
  $ref?: string;
  name: string;
  in: string;
  required?: boolean;
  schema?: Schema;
}
interface Media {
  schema?: Schema;
}
interface RequestBody {
  $ref?: string;
  required?: boolean;
  content?: Record<string, Media>;
}
interface Header {
  $ref?: string;
  required?: boolean;
  schema?: Schema;
}
interface Response {
  $ref?: string;
  headers?: Record<string, Header>;
  content?: Record<string, Media>;
}
interface Operation {
  parameters?: Parameter[];
  requestBody?: RequestBody;
  responses?: Record<string, Response>;
}
export interface Document {
  paths?: Record<string, Record<string, unknown> & { parameters?: Parameter[] }>;
  components?: Record<string, Record<string, unknown> | undefined>;
}

type Direction = 'request' | 'response';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
/** Request keywords whose smaller value narrows what is accepted, and those whose larger value does. */
const UPPER_BOUNDS = ['maxLength', 'maxItems', 'maxProperties', 'maximum'];
const LOWER_BOUNDS = ['minLength', 'minItems', 'minProperties', 'minimum'];

/** Follows `#/components/...` references (chains too). */
function deref<T extends { $ref?: string }>(doc: Document, value: T | undefined): T | undefined {
  let current = value;
  for (let hops = 0; current?.$ref !== undefined && hops < 20; hops++) {
    const ref = current.$ref;
    if (!ref.startsWith('#/')) throw new Error(`only local references are read, not ${ref}`);
    let target: unknown = doc;
    for (const part of ref.slice(2).split('/')) {
      target = (target as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    }
    current = target as T | undefined;
  }
  return current;
}

/** A schema with its `allOf` parts merged into one (properties and required lists joined). */
function flatten(doc: Document, input: Schema | undefined): Schema | undefined {
  const schema = deref(doc, input);
  if (!schema?.allOf) return schema;
  const merged: Schema = { ...schema, allOf: undefined, properties: { ...schema.properties }, required: [...(schema.required ?? [])] };
  for (const part of schema.allOf) {
    const flat = flatten(doc, part) ?? {};
    for (const [key, value] of Object.entries(flat)) {
      if (key === 'properties') Object.assign(merged.properties!, value);
      else if (key === 'required') merged.required!.push(...(value as string[]));
      else if (key !== 'allOf' && merged[key] === undefined) merged[key] = value;
    }
  }
  return merged;
}

/** The variants of a oneOf/anyOf, keyed by discriminator value, reference or position. */
function variants(doc: Document, schema: Schema): Map<string, Schema> | null {
  const list = schema.oneOf ?? schema.anyOf;
  if (!list) return null;
  const out = new Map<string, Schema>();
  list.forEach((variant, index) => {
    const property = schema.discriminator?.propertyName;
    const tag = property ? flatten(doc, flatten(doc, variant)?.properties?.[property])?.enum : undefined;
    const key = tag?.length === 1 ? `${property}=${String(tag[0])}` : (variant.$ref ?? `#${index}`);
    out.set(key, variant);
  });
  return out;
}

/**
 * The released schema promises that clients tolerate enum values they do not know: it is marked
 * extensible, or (in a document older than the marker, `legacy`) its description says so.
 */
function extensibleEnum(schema: Schema, legacy: boolean): boolean {
  return schema[EXTENSIBLE] === true || (legacy && /tolerate new values/i.test(schema.description ?? ''));
}

/** `type` is one of the media types the range `range` (any type, `image/*`) stands for. */
function within(range: string, type: string): boolean {
  return range === '*/*' || (range.endsWith('/*') && type.toLowerCase().startsWith(range.slice(0, -1).toLowerCase()));
}

function enumValues(schema: Schema): Set<string> | null {
  if (!schema.enum) return null;
  const values = new Set(schema.enum.map((v) => JSON.stringify(v)));
  if (schema.nullable) values.add('null');
  return values;
}

class Comparison {
  readonly problems: string[] = [];
  /** The released document predates the extensible-enum marker: its prose says which enums are open. */
  private readonly legacy: boolean;
  constructor(
    private readonly older: Document,
    private readonly newer: Document,
  ) {
    this.legacy = !JSON.stringify(older).includes(`"${EXTENSIBLE}"`);
  }

  private report(where: string, what: string): void {
    this.problems.push(`${where}: ${what}`);
  }

  run(): string[] {
    for (const [route, oldItem] of Object.entries(this.older.paths ?? {})) {
      const newItem = this.newer.paths?.[route];
      for (const method of METHODS) {
        const oldOp = oldItem[method] as Operation | undefined;
        if (!oldOp) continue;
        const where = `${method.toUpperCase()} ${route}`;
        const newOp = newItem?.[method] as Operation | undefined;
        if (!newOp) {
          this.report(where, 'operation removed');
          continue;
        }
        this.parameters(
          where,
          [...(oldItem.parameters ?? []), ...(oldOp.parameters ?? [])],
          [...(newItem?.parameters ?? []), ...(newOp.parameters ?? [])],
        );
        this.requestBody(where, deref(this.older, oldOp.requestBody), deref(this.newer, newOp.requestBody));
        this.responses(where, oldOp.responses ?? {}, newOp.responses ?? {});
      }
    }
    return this.problems;
  }

  private parameters(where: string, oldList: Parameter[], newList: Parameter[]): void {
    const byKey = (doc: Document, list: Parameter[]) =>
      new Map(list.map((p) => deref(doc, p)!).map((p) => [`${p.in} parameter ${p.name}`, p]));
    const olds = byKey(this.older, oldList);
    const news = byKey(this.newer, newList);
    for (const [key, param] of news) {
      const before = olds.get(key);
      if (param.required && !before?.required) this.report(where, `${key} is ${before ? 'now' : 'new and'} required`);
    }
    for (const [key, param] of olds) {
      const after = news.get(key);
      if (!after) {
        if (param.in === 'query' || param.in === 'path') this.report(where, `${key} removed`);
        continue;
      }
      this.schema(`${where} ${key}`, 'request', param.schema, after.schema, 'value');
    }
  }

  private requestBody(where: string, before: RequestBody | undefined, after: RequestBody | undefined): void {
    if (after?.required && !before?.required) this.report(where, 'request body is now required');
    if (!before) return;
    for (const [type, media] of Object.entries(before.content ?? {})) {
      const next = after?.content?.[type];
      if (!next) this.report(where, `request media type ${type} removed`);
      else this.schema(`${where} request ${type}`, 'request', media.schema, next.schema);
    }
  }

  private responses(where: string, olds: Record<string, Response>, news: Record<string, Response>): void {
    for (const [status, oldRef] of Object.entries(olds)) {
      const at = `${where} ${status}`;
      if (!news[status]) {
        this.report(at, 'response status removed');
        continue;
      }
      const before = deref(this.older, oldRef)!;
      const after = deref(this.newer, news[status])!;
      const newHeaders = new Map(Object.entries(after.headers ?? {}).map(([name, h]) => [name.toLowerCase(), h]));
      for (const [header, oldHeader] of Object.entries(before.headers ?? {})) {
        const next = deref(this.newer, newHeaders.get(header.toLowerCase()));
        if (!next) {
          this.report(at, `response header ${header} removed`);
          continue;
        }
        const old = deref(this.older, oldHeader)!;
        if (old.required && !next.required) this.report(at, `response header ${header} no longer always sent`);
        this.schema(`${at} response header ${header}`, 'response', old.schema, next.schema, 'value');
      }
      for (const [type, media] of Object.entries(before.content ?? {})) {
        // A range (any type, `image/*`) may narrow to the types within it: the client accepted them all.
        const next = after.content?.[type]
          ? [[type, after.content[type]] as const]
          : Object.entries(after.content ?? {}).filter(([t]) => within(type, t));
        if (next.length === 0) this.report(at, `response media type ${type} removed`);
        for (const [t, m] of next) this.schema(`${at} ${t}`, 'response', media.schema, m.schema);
      }
    }
  }

  /** Compares one schema position; `field` names it (`body.note.title`, `items[]`). */
  schema(where: string, dir: Direction, oldInput: Schema | undefined, newInput: Schema | undefined, field = 'body'): void {
    if (!oldInput || !newInput) return;
    // A schema that refers to itself is compared to a bounded depth.
    if (field.length > 400) return;
    const before = flatten(this.older, oldInput);
    const after = flatten(this.newer, newInput);
    if (!before || !after) return;
    const at = `${where} ${field}`;

    if (this.alternatives(where, dir, before, after, field)) return;

    // Types: a request may come to accept a wider type, a response may only narrow.
    if (before.type !== after.type) {
      const widening = after.type === undefined || (before.type === 'integer' && after.type === 'number');
      const narrowing = before.type === undefined || (before.type === 'number' && after.type === 'integer');
      if (dir === 'request' && !widening) this.report(at, `type narrowed from ${before.type ?? 'any'} to ${after.type ?? 'any'}`);
      if (dir === 'response' && !narrowing) this.report(at, `type changed from ${before.type ?? 'any'} to ${after.type ?? 'any'}`);
    }
    if (dir === 'request' && before.nullable && !after.nullable) this.report(at, 'no longer accepts null');
    if (dir === 'response' && !before.nullable && after.nullable) this.report(at, 'may now be null');

    const oldEnum = enumValues(before);
    const newEnum = enumValues(after);
    if (dir === 'request' && newEnum) {
      const lost = oldEnum ? [...oldEnum].filter((v) => !newEnum.has(v)) : null;
      if (!oldEnum) this.report(at, `enum added (${[...newEnum].join(', ')})`);
      else if (lost!.length) this.report(at, `enum values removed: ${lost!.join(', ')}`);
    }
    if (dir === 'response' && oldEnum && !extensibleEnum(before, this.legacy)) {
      const gained = newEnum ? [...newEnum].filter((v) => !oldEnum.has(v)) : null;
      if (!newEnum) this.report(at, 'enum removed (any value may now be sent)');
      else if (gained!.length) this.report(at, `enum values added: ${gained!.join(', ')} (the released enum is not marked ${EXTENSIBLE})`);
    }

    if (dir === 'request') {
      for (const key of UPPER_BOUNDS) {
        const [o, n] = [before[key] as number | undefined, after[key] as number | undefined];
        if (n !== undefined && (o === undefined || n < o)) this.report(at, `${key} narrowed from ${o ?? 'none'} to ${n}`);
      }
      for (const key of LOWER_BOUNDS) {
        const [o, n] = [before[key] as number | undefined, after[key] as number | undefined];
        if (n !== undefined && (o === undefined || n > o)) this.report(at, `${key} narrowed from ${o ?? 'none'} to ${n}`);
      }
      if (after.pattern !== undefined && after.pattern !== before.pattern) this.report(at, `pattern changed to ${after.pattern}`);
      if (after.additionalProperties === false && before.additionalProperties !== false && before.type === 'object') {
        this.report(at, 'no longer accepts additional properties');
      }
    }

    this.properties(where, dir, before, after, field);
    if (before.items && after.items) this.schema(where, dir, before.items, after.items, `${field}[]`);
    if (typeof before.additionalProperties === 'object' && typeof after.additionalProperties === 'object') {
      this.schema(where, dir, before.additionalProperties, after.additionalProperties, `${field}{}`);
    }
  }

  private properties(where: string, dir: Direction, before: Schema, after: Schema, field: string): void {
    const skip = (s: Schema | undefined, doc: Document) => {
      const flat = flatten(doc, s);
      return dir === 'request' ? flat?.readOnly === true : flat?.writeOnly === true;
    };
    const oldProps = before.properties ?? {};
    const newProps = after.properties ?? {};
    const oldRequired = new Set(before.required ?? []);
    const newRequired = new Set(after.required ?? []);
    for (const [name, oldProp] of Object.entries(oldProps)) {
      if (skip(oldProp, this.older)) continue;
      const at = `${where} ${field}.${name}`;
      const newProp = newProps[name];
      if (!newProp) {
        if (dir === 'response') this.report(at, 'response field removed');
        else if (after.additionalProperties === false) this.report(at, 'request field removed (it would now be refused)');
        continue;
      }
      if (dir === 'response' && oldRequired.has(name) && !newRequired.has(name)) this.report(at, 'response field no longer always present');
      this.schema(where, dir, oldProp, newProp, `${field}.${name}`);
    }
    if (dir === 'request') {
      for (const name of newRequired) {
        if (!oldRequired.has(name) && !skip(newProps[name], this.newer))
          this.report(`${where} ${field}.${name}`, 'new required request field');
      }
    }
  }

  /** oneOf/anyOf: each published request variant must still be accepted; a response gains variants only where clients tolerate them. Returns true when handled. */
  private alternatives(where: string, dir: Direction, before: Schema, after: Schema, field: string): boolean {
    const olds = variants(this.older, before);
    const news = variants(this.newer, after);
    if (!olds && !news) return false;
    const oldMap = olds ?? new Map([['*', before]]);
    const newMap = news ?? new Map([['*', after]]);
    // A variant is matched by its key (discriminator value, else reference), then by reference
    // (its discriminator value changed or became more than one); a schema that was (or becomes)
    // one shape is compared with each variant of the other side.
    const byRef = (list: Map<string, Schema>) => new Map([...list.values()].filter((v) => v.$ref).map((v) => [v.$ref!, v]));
    const [oldRefs, newRefs] = [byRef(oldMap), byRef(newMap)];
    const single = (list: Map<string, Schema> | null, one: Schema) => (list ? undefined : one);
    if (dir === 'request') {
      for (const [key, variant] of oldMap) {
        const match = newMap.get(key) ?? (variant.$ref ? newRefs.get(variant.$ref) : undefined) ?? single(news, after);
        if (!match) this.report(`${where} ${field}`, `request variant ${key} removed`);
        else this.schema(where, dir, variant, match, field);
      }
    } else {
      for (const [key, variant] of newMap) {
        const match = oldMap.get(key) ?? (variant.$ref ? oldRefs.get(variant.$ref) : undefined) ?? single(olds, before);
        if (!match) {
          if (!/tolerate new/i.test(before.description ?? '')) this.report(`${where} ${field}`, `response variant ${key} added`);
        } else this.schema(where, dir, match, variant, field);
      }
    }
    return true;
  }
}

/** Every breaking difference of `newer` from the released `older`, one line each. */
export function breakingChanges(older: Document, newer: Document): string[] {
  return new Comparison(older, newer).run();
}

/**
 * Misplaced or missing extensible-enum markers in the current document: the marker is `true` on a
 * schema with an `enum`, and an enum whose description tells clients to tolerate new values has it.
 */
export function markerProblems(doc: Document): string[] {
  const problems: string[] = [];
  const visit = (value: unknown, where: string): void => {
    if (!value || typeof value !== 'object') return;
    if (Array.isArray(value)) return value.forEach((item, index) => visit(item, `${where}/${index}`));
    const node = value as Schema;
    const marker = node[EXTENSIBLE];
    if (marker !== undefined && marker !== true) problems.push(`${where}: ${EXTENSIBLE} must be true (or absent)`);
    else if (marker === true && !Array.isArray(node.enum)) problems.push(`${where}: ${EXTENSIBLE} on a schema without an enum`);
    if (Array.isArray(node.enum) && marker !== true && /tolerate new values/i.test(node.description ?? '')) {
      problems.push(`${where}: the description says clients must tolerate new values, but the enum is not marked ${EXTENSIBLE}: true`);
    }
    for (const [key, child] of Object.entries(node)) {
      if (key !== 'example' && key !== 'examples' && !(key === 'enum' && Array.isArray(child)))
        visit(child, `${where}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`);
    }
  };
  visit(doc.paths, '#/paths');
  visit(doc.components, '#/components');
  return problems;
}

const PROJECT = path.resolve(__dirname, '..');
const RELEASE_TAG = /^api-v(\d+)\.(\d+)\.(\d+)$/;

/** `dir`/openapi/openapi.yaml bundled (the same bundle `make gen` writes), run from `cwd` (its redocly.yaml). */
function bundle(dir: string, cwd: string): Document {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'compat-'));
  try {
    const out = path.join(tmp, 'openapi.json');
    const redocly = path.join(PROJECT, 'node_modules', '.bin', 'redocly');
    execFileSync(redocly, ['bundle', path.join(dir, 'openapi', 'openapi.yaml'), '--ext', 'json', '--output', out], {
      cwd,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    return JSON.parse(fs.readFileSync(out, 'utf8')) as Document;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** openapi/ as `commit` holds it, bundled. */
function bundleAt(root: string, commit: string): Document {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'compat-rev-'));
  try {
    const archive = execFileSync('git', ['archive', '--format=tar', commit, 'openapi'], { cwd: root, maxBuffer: 1 << 28 });
    execFileSync('tar', ['-x', '-C', tmp], { input: archive });
    return bundle(tmp, root);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** What git offers to compare with (see the header). */
export type Baseline =
  | { kind: 'commit'; commit: string; label: string }
  /** Nothing earlier exists (a first commit, no document there): nothing to break. */
  | { kind: 'nothing'; reason: string }
  /** COMPAT_BASE=none. */
  | { kind: 'skipped'; reason: string }
  /** The baseline is not in this clone: the guard fails and says so. */
  | { kind: 'unavailable'; reason: string };

/** The last released document's commit, chosen as the header says. */
export function gitBaseline(root: string, env: NodeJS.ProcessEnv = process.env): Baseline {
  const git = (...args: string[]): string | undefined => {
    try {
      return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return undefined;
    }
  };
  const commitOf = (rev: string) => git('rev-parse', '--verify', '--quiet', `${rev}^{commit}`);
  const short = (commit: string) => git('rev-parse', '--short', commit) ?? commit;
  const withDocument = (commit: string, label: string): Baseline =>
    git('cat-file', '-e', `${commit}:openapi/openapi.yaml`) === undefined
      ? { kind: 'nothing', reason: `${label} has no openapi/openapi.yaml` }
      : { kind: 'commit', commit, label };

  const asked = env.COMPAT_BASE?.trim();
  if (asked === 'none') return { kind: 'skipped', reason: 'COMPAT_BASE=none' };
  if (git('rev-parse', '--is-inside-work-tree') !== 'true') return { kind: 'unavailable', reason: 'this is not a git checkout' };
  const shallow = git('rev-parse', '--is-shallow-repository') === 'true';
  if (asked) {
    const commit = commitOf(asked);
    if (!commit) return { kind: 'unavailable', reason: `COMPAT_BASE=${asked} is not a commit in this ${shallow ? 'shallow ' : ''}clone` };
    return withDocument(commit, `${short(commit)} (COMPAT_BASE=${asked})`);
  }
  const head = commitOf('HEAD');
  if (!head) return { kind: 'nothing', reason: 'the repository has no commit yet' };
  const dirty = git('status', '--porcelain', '--', 'openapi', ':(exclude)openapi/published') !== '';

  const tags = (git('tag', '--merged', 'HEAD', '--list', 'api-v*') ?? '')
    .split('\n')
    .map((name) => ({ name, version: RELEASE_TAG.exec(name)?.slice(1).map(Number), commit: commitOf(name) }))
    .filter((tag) => tag.version && tag.commit && (dirty || tag.commit !== head))
    .sort((a, b) => b.version![0]! - a.version![0]! || b.version![1]! - a.version![1]! || b.version![2]! - a.version![2]!);
  if (tags[0]) return withDocument(tags[0].commit!, `${tags[0].name} (${short(tags[0].commit!)}, the last release tag)`);

  const main = ['refs/heads/main', 'refs/remotes/origin/main'].find((ref) => commitOf(ref));
  const mainName = main?.replace(/^refs\/(heads|remotes)\//, '') ?? 'main';
  if (main && git('merge-base', '--is-ancestor', 'HEAD', main) === undefined) {
    const base = git('merge-base', 'HEAD', main);
    if (!base) {
      const why = shallow ? 'is not in this shallow clone' : 'does not exist (unrelated histories)';
      return { kind: 'unavailable', reason: `the commit where HEAD's branch leaves ${mainName} ${why}` };
    }
    return withDocument(base, `${short(base)} (where this branch leaves ${mainName})`);
  }
  const onMain = main ? `${mainName}'s` : `HEAD's (no main branch here: HEAD is taken to be on it)`;
  if (dirty) return withDocument(head, `${short(head)} (HEAD, the last commit: openapi/ has uncommitted changes)`);
  const parent = commitOf('HEAD^1');
  if (!parent) {
    return shallow
      ? { kind: 'unavailable', reason: `HEAD~1, ${onMain} previous commit, is not in this shallow clone` }
      : { kind: 'nothing', reason: 'HEAD is the first commit' };
  }
  return withDocument(parent, `${short(parent)} (HEAD~1, ${onMain} previous commit: openapi/ is as HEAD commits it)`);
}

/** The reviewed list of accepted breaking changes, relative to the project root. */
export const ACCEPTED = 'openapi/published/accepted.yaml';

/**
 * Reported problems accepted on purpose, each with its reason: corrections of the document to what
 * the service already does, never a change of behaviour.
 */
function acceptedChanges(root: string): Map<string, string> {
  const file = path.join(root, ACCEPTED);
  if (!fs.existsSync(file)) return new Map();
  const list = (parse(fs.readFileSync(file, 'utf8')) ?? []) as { change?: unknown; why?: unknown }[];
  if (!Array.isArray(list)) throw new Error(`${ACCEPTED}: a list of { change, why }`);
  return new Map(
    list.map((entry, index) => {
      if (typeof entry?.change !== 'string' || typeof entry.why !== 'string' || !entry.why.trim()) {
        throw new Error(`${ACCEPTED} entry ${index + 1}: needs \`change\` (a problem line, exactly as reported) and \`why\``);
      }
      return [entry.change, entry.why.trim()] as const;
    }),
  );
}

export interface Output {
  out(line: string): void;
  err(line: string): void;
}

/** `make compat` on the project at `root`; returns the exit status. */
export function run(root = PROJECT, env: NodeJS.ProcessEnv = process.env, io: Output = { out: console.log, err: console.error }): number {
  const current = bundle(root, root);
  const accepted = acceptedChanges(root);
  const used = new Set<string>();
  let breaking = false;
  let incomplete = false;
  const compare = (label: string, released: Document) => {
    const all = breakingChanges(released, current);
    const problems = all.filter((problem) => !accepted.has(problem));
    for (const problem of all.filter((p) => accepted.has(p))) {
      used.add(problem);
      io.out(`accepted against ${label}: ${problem} (${ACCEPTED}: ${accepted.get(problem)})`);
    }
    if (problems.length === 0) return io.out(`compatible with ${label}`);
    breaking = true;
    io.err(`${problems.length} breaking change(s) against ${label}:`);
    for (const problem of problems) io.err(`  - ${problem}`);
  };

  const markers = markerProblems(current);
  if (markers.length) {
    incomplete = true;
    io.err(`${markers.length} ${EXTENSIBLE} marker problem(s) in openapi/:`);
    for (const problem of markers) io.err(`  - ${problem}`);
  }

  const publishedDir = path.join(root, 'openapi', 'published');
  const files = fs.existsSync(publishedDir) ? fs.readdirSync(publishedDir).filter((f) => f.endsWith('.json')) : [];
  if (files.length === 0) io.out('no published snapshot in openapi/published/ to compare with');
  for (const file of files.sort())
    compare(`the published ${file}`, JSON.parse(fs.readFileSync(path.join(publishedDir, file), 'utf8')) as Document);

  const base = gitBaseline(root, env);
  if (base.kind === 'commit') compare(base.label, bundleAt(root, base.commit));
  else if (base.kind === 'nothing') io.out(`no earlier document in git to compare with: ${base.reason}`);
  else if (base.kind === 'skipped')
    io.out(`not compared with the last released document in git (${base.reason}): only with openapi/published/`);
  else {
    incomplete = true;
    io.err(
      `NOT compared with the last released document in git: ${base.reason}. Fetch the history it needs ` +
        '(git fetch --deepen=1, or --unshallow), or set COMPAT_BASE=<commit> to compare with another commit, ' +
        'or COMPAT_BASE=none to compare with openapi/published/ only.',
    );
  }
  for (const problem of accepted.keys())
    if (!used.has(problem)) io.out(`${ACCEPTED} lists a change no comparison finds (remove it): ${problem}`);
  if (breaking)
    io.err(
      'Released operations change only additively (openapi.yaml "Versioning", docs/api.md "Compatibility"); a breaking change needs /api/v2.',
    );
  return breaking || incomplete ? 1 : 0;
}

if (require.main === module) process.exitCode = run();
