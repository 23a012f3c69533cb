import Ajv2019 from 'ajv/dist/2019';
import Ajv2020, { type ErrorObject, type Options, type ValidateFunction } from 'ajv/dist/2020';
import draft06 from 'ajv/dist/refs/json-schema-draft-06.json';
import draft07 from 'ajv/dist/refs/json-schema-draft-07.json';
import canonicalize from 'canonicalize';

/**
 * Tool schemas come from MCP servers as well as from the built-in tools: unknown keywords and
 * formats are ignored rather than refused (`format` is an annotation in 2019-09 and 2020-12, and
 * the server checks its own), and every problem is reported so the model can fix them at once.
 */
const OPTIONS: Options = { strict: false, allErrors: true, validateFormats: false };

/** The most distinct schemas kept compiled; the oldest is dropped past it. */
const MAX_COMPILED = 500;

/**
 * What checking a tool's arguments found: the problems (none when valid), or that its schema could
 * not be compiled, why, and whether this is the first check of that schema.
 */
export type ArgumentsCheck = { compiled: true; problems: string[] } | { compiled: false; reason: string; first: boolean };

type Compiled = { validate: ValidateFunction } | { reason: string; checked: boolean };

/** An Ajv error as one problem for the model, naming the argument (`sources[0]`, `filter.tag`). */
function describe(error: ErrorObject): string {
  const at = pathOf(error.instancePath);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${join(at, String(params.missingProperty))} is required`;
    case 'additionalProperties':
      return `${join(at, String(params.additionalProperty))} is not a known ${at === '' ? 'argument' : 'property'}`;
    case 'uniqueItems': {
      const [i, j] = [Number(params.i), Number(params.j)];
      return `${at || 'the arguments'} must NOT have duplicate items (items ${Math.min(i, j)} and ${Math.max(i, j)} are identical)`;
    }
    case 'enum': {
      const values = (params.allowedValues as unknown[]).map((v) => (typeof v === 'string' ? v : JSON.stringify(v)));
      return `${at || 'the arguments'} must be one of ${values.join(', ')}`;
    }
    default:
      return `${at || 'the arguments'} ${error.message ?? 'is not valid'}`;
  }
}

/** A JSON Pointer (`/sources/0`) as a path a model reads (`sources[0]`). */
function pathOf(pointer: string): string {
  if (pointer === '') return '';
  return pointer
    .slice(1)
    .split('/')
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, segment) => (/^\d+$/.test(segment) ? `${path}[${segment}]` : join(path, segment)), '');
}

const join = (path: string, name: string) => (path === '' ? name : `${path}.${name}`);

/**
 * Checks a tool call's arguments against the tool's input schema with Ajv: 2020-12 (what MCP
 * assumes when a schema names no `$schema`) or, for schemas that name one, draft-06, draft-07 or
 * 2019-09. Each distinct schema is compiled once; the check of a schema Ajv cannot compile (a
 * dialect it does not know, a `$ref` that resolves nowhere, an invalid schema) says so.
 */
export class ToolArguments {
  private readonly draft2020 = new Ajv2020(OPTIONS);
  private readonly draft2019 = new Ajv2019(OPTIONS).addMetaSchema(draft06).addMetaSchema(draft07);
  /** By the schema's canonical JSON: MCP schemas are read afresh from storage for every turn. */
  private readonly compiled = new Map<string, Compiled>();

  check(schema: Record<string, unknown>, args: Record<string, unknown>): ArgumentsCheck {
    const entry = this.compile(schema);
    if ('reason' in entry) {
      const first = !entry.checked;
      entry.checked = true;
      return { compiled: false, reason: entry.reason, first };
    }
    return { compiled: true, problems: entry.validate(args) ? [] : (entry.validate.errors ?? []).map(describe) };
  }

  private compile(schema: Record<string, unknown>): Compiled {
    let key: string;
    try {
      key = canonicalize(schema) ?? '';
    } catch (error) {
      return { reason: (error as Error).message, checked: false };
    }
    let entry = this.compiled.get(key);
    if (entry) return entry;
    const ajv =
      schema.$schema === undefined || /\/draft\/2020-12\/schema#?$/.test(String(schema.$schema)) ? this.draft2020 : this.draft2019;
    try {
      entry = { validate: ajv.compile(schema) };
    } catch (error) {
      // A stack overflow (a schema nested too deep) or Ajv's refusal: the schema is not checked.
      entry = { reason: (error as Error).message, checked: false };
    } finally {
      // Ajv would keep every schema object it compiled (and refuse a second schema with the same
      // `$id`); the compiled function is kept here instead.
      ajv.removeSchema(schema);
    }
    if (this.compiled.size >= MAX_COMPILED) this.compiled.delete(this.compiled.keys().next().value as string);
    this.compiled.set(key, entry);
    return entry;
  }
}
