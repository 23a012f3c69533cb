import fc from 'fast-check';

/** A JSON Schema as OpenAPI 3.0 writes it (the subset the document uses). */
export interface Schema {
  $ref?: string;
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  nullable?: boolean;
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
  default?: unknown;
  example?: unknown;
}

export type Resolve = (schema: Schema) => Schema;

/** Resolves `$ref`s into the bundled document's components. */
export function resolver(doc: { components?: { schemas?: Record<string, Schema> } }): Resolve {
  const resolve: Resolve = (schema) => {
    if (!schema.$ref) return schema;
    const name = schema.$ref.replace('#/components/schemas/', '');
    const target = doc.components?.schemas?.[name];
    if (!target) throw new Error(`unresolved ${schema.$ref}`);
    return resolve(target);
  };
  return resolve;
}

/** allOf flattened into one schema (the document uses it to add a description or default). */
function flatten(schema: Schema, resolve: Resolve): Schema {
  const own = resolve(schema);
  if (!own.allOf) return own;
  return own.allOf.reduce<Schema>((merged, part) => ({ ...merged, ...flatten(part, resolve) }), { ...own, allOf: undefined });
}

/**
 * Characters that try the service's handling of text: NUL (refused), other C0 controls, DEL, C1 and
 * Unicode oddities (valid text, kept), lone surrogates of either half (refused) and a valid pair.
 */
export const AWKWARD_CHARACTERS = [
  '\u0000',
  '\u0001',
  '\u0008',
  '\t',
  '\n',
  '\r',
  '\u000b',
  '\u001b',
  '\u001f',
  '\u007f',
  '\u0085',
  '\u00a0',
  '\u200b',
  '\u2028',
  '\ufeff',
  '\uffff',
  '\ud800',
  '\udbff',
  '\udc00',
  '\udfff',
  '\ud83d\ude00',
] as const;

const plainText = (min: number, max: number) => fc.string({ minLength: min, maxLength: Math.min(max, min + 40), unit: 'grapheme-ascii' });

/** Plain text with one awkward character put somewhere in it, within the length bounds. */
const awkwardText = (min: number, max: number) =>
  fc.tuple(plainText(min, max), fc.constantFrom(...AWKWARD_CHARACTERS), fc.nat()).map(([base, odd, at]) => {
    const kept = base.slice(0, Math.max(0, max - odd.length));
    const position = at % (kept.length + 1);
    return `${kept.slice(0, position)}${odd}${kept.slice(position)}`;
  });

/** A string of the given length bounds; one in three holds an awkward character. */
const text = (min: number, max: number) =>
  max >= 1 ? fc.oneof({ weight: 2, arbitrary: plainText(min, max) }, { weight: 1, arbitrary: awkwardText(min, max) }) : plainText(min, max);

/**
 * encodeURIComponent, except that a lone surrogate (which it refuses) is sent as the percent-encoded
 * bytes a careless client would send for it (its generalized UTF-8 form, e.g. %ED%A0%80).
 */
export function encodeUriText(value: string): string {
  return value.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]|[\s\S]/g, (char) => {
    const code = char.charCodeAt(0);
    if (char.length === 2 || code < 0xd800 || code > 0xdfff) return encodeURIComponent(char);
    return [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
      .map((byte) => `%${byte.toString(16).toUpperCase()}`)
      .join('');
  });
}

/** Whether a string of the value (or a property name in it) holds NUL or a lone surrogate. */
export function holdsUnstorableText(value: unknown): boolean {
  const unstorable = (text: string) => /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);
  if (typeof value === 'string') return unstorable(value);
  if (typeof value !== 'object' || value === null) return false;
  return Object.entries(value).some(([key, item]) => unstorable(key) || holdsUnstorableText(item));
}

/**
 * Nesting depth as a dimension: a JSON text of `levels` arrays or objects (or both, alternating)
 * around one scalar, from a few levels to far past the service's limit (MAX_NESTING) and deeper
 * than any recursive code could take. Built as text, iteratively, since the fuzzer's own
 * JSON.stringify could not serialise the deepest ones.
 */
export interface NestedJson {
  json: string;
  levels: number;
  /** Whether a property name or the scalar holds text the service refuses (NUL, a lone surrogate). */
  unstorable: boolean;
}

const unstorableText = (text: string) => /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);

/** Mostly around the limit, sometimes far past it. */
const nestingLevels: fc.Arbitrary<number> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 80 }) },
  { weight: 2, arbitrary: fc.constantFrom(62, 63, 64, 65, 66) },
  { weight: 1, arbitrary: fc.integer({ min: 100, max: 10_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(100_000) },
);

export const nestedJson: fc.Arbitrary<NestedJson> = fc
  .record({
    levels: nestingLevels,
    shape: fc.constantFrom('arrays', 'objects', 'alternating'),
    key: fc.oneof({ weight: 3, arbitrary: fc.constant('a') }, { weight: 1, arbitrary: text(1, 4) }),
    leaf: fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), text(0, 12)),
  })
  .map(({ levels, shape, key, leaf }) => {
    const opener = (level: number) =>
      shape === 'arrays' || (shape === 'alternating' && level % 2 === 0) ? '[' : `{${JSON.stringify(key)}:`;
    const opened = Array.from({ length: levels }, (_, level) => opener(level));
    const closed = opened.map((open) => (open === '[' ? ']' : '}')).reverse();
    const json = `${opened.join('')}${JSON.stringify(leaf)}${closed.join('')}`;
    const unstorable = (shape !== 'arrays' && unstorableText(key)) || (typeof leaf === 'string' && unstorableText(leaf));
    return { json, levels, unstorable };
  });

/** A free-form JSON object of moderate nesting (a chain of up to 40 levels in some), as a value. */
const freeFormObject: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  fc.constant({}),
  fc.dictionary(plainText(1, 8), fc.jsonValue({ maxDepth: 4 }), { maxKeys: 4 }),
  fc.tuple(fc.integer({ min: 1, max: 40 }), fc.boolean(), fc.jsonValue({ maxDepth: 1 })).map(([levels, arrays, leaf]) => {
    let value: unknown = leaf;
    for (let level = 0; level < levels; level += 1) value = arrays ? [value] : { nested: value };
    return { chain: value };
  }),
);

/** A query string of the values (arrays repeat their name, null sends the name alone). */
export function queryString(query: Record<string, unknown>): string {
  return Object.entries(query)
    .filter(([, value]) => value !== undefined)
    .flatMap(([name, value]) =>
      (Array.isArray(value) ? value : [value]).map((item) =>
        item === null ? encodeUriText(name) : `${encodeUriText(name)}=${encodeUriText(String(item))}`,
      ),
    )
    .join('&');
}

/**
 * The caller's identity fields a request body may carry for compatibility (`UserIdField`: another
 * value than the caller's id is 403; `AccessTokenField`: ignored). Not generated: they would only
 * be refused or ignored. A property named `userId` of another schema (`TargetUserId`, the user an
 * administrative action is about) is data and is generated like any other.
 */
export const IDENTITY_SCHEMAS: readonly string[] = ['UserIdField', 'AccessTokenField'];

/** Whether the property schema `property` is one of the components named in `omitted` (by `$ref`). */
export const isOmitted = (property: Schema, omitted: readonly string[] = IDENTITY_SCHEMAS): boolean =>
  typeof property.$ref === 'string' && omitted.some((name) => property.$ref === `#/components/schemas/${name}`);

/**
 * Values that mostly satisfy a schema (a `pattern` is approximated, so some are refused: the
 * service must still answer 4xx for those). Depth-limited. Properties whose schema is one of the
 * components `omitted` are never generated (by default the identity fields, IDENTITY_SCHEMAS).
 */
export function valueFor(
  schema: Schema,
  resolve: Resolve,
  depth = 0,
  omitted: readonly string[] = IDENTITY_SCHEMAS,
): fc.Arbitrary<unknown> {
  const s = flatten(schema, resolve);
  const plain = ((): fc.Arbitrary<unknown> => {
    if (s.enum) return fc.constantFrom(...s.enum.filter((v) => v !== null));
    const variants = s.oneOf ?? s.anyOf;
    if (variants) return fc.oneof(...variants.map((v) => valueFor(v, resolve, depth + 1, omitted)));
    switch (s.type) {
      case 'string': {
        const min = s.minLength ?? 0;
        const max = s.maxLength ?? 60;
        if (s.pattern === '\\S' || s.pattern === '\\S')
          return text(Math.max(min, 1), max).map((v) => (v.trim() === '' ? `x${v}` : v).slice(0, max));
        return text(min, max);
      }
      case 'integer':
        return fc.integer({ min: s.minimum ?? -1000, max: s.maximum ?? 1_000_000 });
      case 'number':
        return fc.double({ min: s.minimum ?? -1000, max: s.maximum ?? 1_000_000, noNaN: true, noDefaultInfinity: true });
      case 'boolean':
        return fc.boolean();
      case 'array': {
        if (depth > 4 || !s.items) return fc.constant([]);
        const items = valueFor(s.items, resolve, depth + 1, omitted);
        const constraints = { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 5, (s.minItems ?? 0) + 5) };
        return s.uniqueItems ? fc.uniqueArray(items, { ...constraints, selector: (v) => JSON.stringify(v) }) : fc.array(items, constraints);
      }
      case 'object':
      default: {
        if (!s.properties && s.additionalProperties === true) return freeFormObject;
        if (depth > 4 || !s.properties) return fc.constant({});
        const keys = Object.entries(s.properties as Record<string, Schema>)
          .filter(([, property]) => !isOmitted(property, omitted))
          .map(([k]) => k);
        const model = Object.fromEntries(
          keys.map((k) => [k, valueFor((s.properties as Record<string, Schema>)[k] as Schema, resolve, depth + 1, omitted)]),
        );
        return fc.record(model, { requiredKeys: keys.filter((k) => s.required?.includes(k)) });
      }
    }
  })();
  return s.nullable ? fc.option(plain, { nil: null, freq: 8 }) : plain;
}

/** A value of the wrong type for a schema. */
export function wrongTypeFor(schema: Schema, resolve: Resolve): fc.Arbitrary<unknown> {
  const s = flatten(schema, resolve);
  const candidates: fc.Arbitrary<unknown>[] = [];
  if (s.type !== 'string' && !s.oneOf) candidates.push(fc.string({ maxLength: 5 }));
  if (s.type !== 'integer' && s.type !== 'number') candidates.push(fc.integer());
  if (s.type !== 'boolean') candidates.push(fc.boolean());
  if (s.type !== 'object') candidates.push(fc.constant({ nested: true }));
  if (s.type !== 'array') candidates.push(fc.constant([1, 'two']));
  if (!s.nullable) candidates.push(fc.constant(null));
  return fc.oneof(...candidates);
}

/** A value just outside a schema's bounds, when it has some. */
export function outOfBoundsFor(schema: Schema, resolve: Resolve): fc.Arbitrary<unknown> | null {
  const s = flatten(schema, resolve);
  if (s.type === 'string' && s.maxLength !== undefined) return fc.constant('x'.repeat(s.maxLength + 1));
  if (s.type === 'string' && (s.minLength ?? 0) > 0) return fc.constant('');
  if ((s.type === 'integer' || s.type === 'number') && s.maximum !== undefined) return fc.constant(s.maximum + 1);
  if ((s.type === 'integer' || s.type === 'number') && s.minimum !== undefined) return fc.constant(s.minimum - 1);
  if (s.type === 'array' && s.maxItems !== undefined && s.items)
    return fc.constant(Array.from({ length: s.maxItems + 1 }, (_, i) => `item-${i}`));
  if (s.enum) return fc.constant('not-one-of-the-values');
  return null;
}
