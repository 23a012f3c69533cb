/**
 * Fails when the document (openapi/, bundled) breaks a published version kept in openapi/published/
 * (`make compat`). `/api/v1` changes only additively (the document's "Versioning"); these rules find
 * what is not additive:
 *   - a removed operation, a removed response status, a removed response media type or header;
 *   - a removed response field, or one that is no longer always present;
 *   - a new required request field or parameter, a request body that becomes required, a removed
 *     query parameter or request field (unknown ones are refused);
 *   - a narrowed type or enum: in a request, a changed type, fewer enum values, a new enum, a
 *     tighter length, size or range, a new pattern, `nullable` dropped; in a response, a changed
 *     type, new enum values (unless the published schema says clients must tolerate them) or
 *     `nullable` added, and new oneOf variants (unless the published schema says clients must
 *     tolerate new ones).
 * The rules read a bundled document (local `#/components/...` references only).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The parts of an OpenAPI 3.0 document the rules read; everything else passes through untyped. */
export interface Schema {
  $ref?: string;
  type?: string;
  nullable?: boolean;
  enum?: unknown[];
  description?: string;
  'x-extensible-enum'?: boolean;
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
interface Response {
  $ref?: string;
  headers?: Record<string, unknown>;
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

/** The published schema promises that clients tolerate enum values they do not know. */
function tolerantEnum(schema: Schema): boolean {
  return schema['x-extensible-enum'] === true || /tolerate new values/i.test(schema.description ?? '');
}

function enumValues(schema: Schema): Set<string> | null {
  if (!schema.enum) return null;
  const values = new Set(schema.enum.map((v) => JSON.stringify(v)));
  if (schema.nullable) values.add('null');
  return values;
}

class Comparison {
  readonly problems: string[] = [];
  constructor(
    private readonly older: Document,
    private readonly newer: Document,
  ) {}

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
      const newHeaders = new Set(Object.keys(after.headers ?? {}).map((h) => h.toLowerCase()));
      for (const header of Object.keys(before.headers ?? {})) {
        if (!newHeaders.has(header.toLowerCase())) this.report(at, `response header ${header} removed`);
      }
      for (const [type, media] of Object.entries(before.content ?? {})) {
        const next = after.content?.[type];
        if (!next) this.report(at, `response media type ${type} removed`);
        else this.schema(`${at} ${type}`, 'response', media.schema, next.schema);
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
    if (dir === 'response' && oldEnum && !tolerantEnum(before)) {
      const gained = newEnum ? [...newEnum].filter((v) => !oldEnum.has(v)) : null;
      if (!newEnum) this.report(at, 'enum removed (any value may now be sent)');
      else if (gained!.length)
        this.report(at, `enum values added: ${gained!.join(', ')} (the published schema does not say clients must tolerate new values)`);
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
    // A schema that was (or becomes) one shape is compared with each variant of the other side.
    const single = (list: Map<string, Schema> | null, one: Schema) => (list ? undefined : one);
    if (dir === 'request') {
      for (const [key, variant] of oldMap) {
        const match = newMap.get(key) ?? single(news, after);
        if (!match) this.report(`${where} ${field}`, `request variant ${key} removed`);
        else this.schema(where, dir, variant, match, field);
      }
    } else {
      for (const [key, variant] of newMap) {
        const match = oldMap.get(key) ?? single(olds, before);
        if (!match) {
          if (!/tolerate new/i.test(before.description ?? '')) this.report(`${where} ${field}`, `response variant ${key} added`);
        } else this.schema(where, dir, match, variant, field);
      }
    }
    return true;
  }
}

/** Every breaking difference of `newer` from the published `older`, one line each. */
export function breakingChanges(older: Document, newer: Document): string[] {
  return new Comparison(older, newer).run();
}

/** The current openapi/ bundled (the same bundle `make gen` writes) into a temporary file. */
function bundleCurrent(root: string): Document {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'compat-'));
  try {
    const out = path.join(dir, 'openapi.json');
    execFileSync(path.join(root, 'node_modules', '.bin', 'redocly'), ['bundle', 'openapi/openapi.yaml', '--ext', 'json', '--output', out], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    return JSON.parse(fs.readFileSync(out, 'utf8')) as Document;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function main(): void {
  const root = path.resolve(__dirname, '..');
  const publishedDir = path.join(root, 'openapi', 'published');
  const current = bundleCurrent(root);
  let failed = 0;
  for (const file of fs
    .readdirSync(publishedDir)
    .filter((f) => f.endsWith('.json'))
    .sort()) {
    const published = JSON.parse(fs.readFileSync(path.join(publishedDir, file), 'utf8')) as Document;
    const problems = breakingChanges(published, current);
    if (problems.length === 0) {
      console.log(`compatible with the published ${file}`);
      continue;
    }
    failed += problems.length;
    console.error(`${problems.length} breaking change(s) against the published ${file}:`);
    for (const problem of problems) console.error(`  - ${problem}`);
  }
  if (failed) {
    console.error('Published operations change only additively (openapi.yaml "Versioning"); a breaking change needs /api/v2.');
    process.exit(1);
  }
}

if (require.main === module) main();
