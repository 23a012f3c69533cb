import fs from 'node:fs';
import path from 'node:path';
import fastJson from 'fast-json-stringify';
import { projectRoot } from '../platform/paths';

/** Writes an operation's 200 body (the object its presenters built) as JSON text. */
export type Serialize = (body: unknown) => string;

type Schema = Record<string, unknown>;
interface Document {
  paths: Record<string, Record<string, { operationId?: string; responses?: Record<string, { content?: Record<string, { schema?: Schema }> }> }>>;
  components: { schemas: Record<string, Schema> };
}

let loaded: Document | undefined;
/** The bundled document the service validates against and serves (read once, on first use). */
function document(): Document {
  loaded ??= JSON.parse(fs.readFileSync(path.join(projectRoot, 'generated', 'openapi.json'), 'utf8')) as Document;
  return loaded;
}

function okSchemas(): Map<string, Schema> {
  const schemas = new Map<string, Schema>();
  for (const item of Object.values(document().paths)) {
    for (const operation of Object.values(item)) {
      const schema = operation?.responses?.['200']?.content?.['application/json']?.schema;
      if (operation?.operationId && schema) schemas.set(operation.operationId, schema);
    }
  }
  return schemas;
}

function resolve(schema: Schema): Schema {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return schema;
  const target = document().components.schemas[ref.replace('#/components/schemas/', '')];
  if (!target) throw new Error(`cannot resolve ${ref}`);
  return resolve(target);
}

/** The components `schema` refers to, directly or through others. */
function referenced(schema: unknown, found: Record<string, Schema> = {}): Record<string, Schema> {
  if (Array.isArray(schema)) for (const item of schema) referenced(item, found);
  else if (typeof schema === 'object' && schema !== null) {
    for (const [key, value] of Object.entries(schema)) {
      if (key !== '$ref' || typeof value !== 'string') referenced(value, found);
      else {
        const name = value.replace('#/components/schemas/', '');
        const target = document().components.schemas[name];
        if (target && !found[name]) referenced(target, (found[name] = target, found));
      }
    }
  }
  return found;
}

/**
 * A serializer compiled by fast-json-stringify from `schema`, with the components it refers to
 * (only those: compiling with all of them took ten times as long).
 */
function compile(schema: Schema): Serialize {
  const root = { ...schema, components: { schemas: referenced(schema) } };
  return fastJson(root as unknown as Parameters<typeof fastJson>[0]) as Serialize;
}

/**
 * The serializer of one 200 schema. A top-level `oneOf` whose branches tell themselves apart by
 * their required properties (a record or a page of them) gets one serializer per branch, chosen by
 * those properties: fast-json-stringify would otherwise validate the whole body against each
 * branch to choose one.
 */
function serializerOf(schema: Schema): Serialize {
  const branches = resolve(schema).oneOf as Schema[] | undefined;
  if (!branches) return compile(schema);
  const required = branches.map((branch) => (resolve(branch).required as string[] | undefined) ?? []);
  const ambiguous = required.some((earlier, i) => required.slice(i + 1).some((later) => earlier.every((key) => later.includes(key))));
  if (ambiguous) return compile(schema);
  const written = branches.map((branch, i) => ({ required: required[i] as string[], write: compile(branch) }));
  return (body) => {
    const fields = body as Record<string, unknown>;
    const branch = written.find(({ required: keys }) => keys.every((key) => fields[key] !== undefined));
    return branch ? branch.write(body) : JSON.stringify(body);
  };
}

const serializers = new Map<string, Serialize>();
const fallbacks = new Set<string>();

/**
 * The writer of an operation's 200 JSON body, compiled from its schema in the document on first
 * use: fast-json-stringify writes only what the schema declares, field by field, without
 * JSON.stringify's inspection of every value. An operation whose schema it cannot compile is
 * written by JSON.stringify (`uncompiledOperations` lists them).
 */
export function serializerFor(operationId: string): Serialize {
  let serialize = serializers.get(operationId);
  if (serialize) return serialize;
  const schema = okSchemas().get(operationId);
  try {
    if (!schema) throw new Error(`${operationId} has no 200 JSON schema`);
    serialize = serializerOf(schema);
  } catch {
    fallbacks.add(operationId);
    serialize = JSON.stringify;
  }
  serializers.set(operationId, serialize);
  return serialize;
}

/** Compiles every operation's writer; the operations written by JSON.stringify instead. */
export function uncompiledOperations(): string[] {
  for (const operationId of okSchemas().keys()) serializerFor(operationId);
  return [...fallbacks].sort();
}
