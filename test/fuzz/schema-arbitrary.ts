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

const text = (min: number, max: number) => fc.string({ minLength: min, maxLength: Math.min(max, min + 40), unit: 'grapheme-ascii' });

/**
 * Values that mostly satisfy a schema (a `pattern` is approximated, so some are refused: the
 * service must still answer 4xx for those). Depth-limited.
 */
export function valueFor(schema: Schema, resolve: Resolve, depth = 0): fc.Arbitrary<unknown> {
  const s = flatten(schema, resolve);
  const plain = ((): fc.Arbitrary<unknown> => {
    if (s.enum) return fc.constantFrom(...s.enum.filter((v) => v !== null));
    const variants = s.oneOf ?? s.anyOf;
    if (variants) return fc.oneof(...variants.map((v) => valueFor(v, resolve, depth + 1)));
    switch (s.type) {
      case 'string': {
        const min = s.minLength ?? 0;
        const max = s.maxLength ?? 60;
        if (s.pattern === '\\S' || s.pattern === '\\S') return text(Math.max(min, 1), max).map((v) => (v.trim() === '' ? `x${v}` : v).slice(0, max));
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
        const items = valueFor(s.items, resolve, depth + 1);
        const constraints = { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 5, (s.minItems ?? 0) + 5) };
        return s.uniqueItems ? fc.uniqueArray(items, { ...constraints, selector: (v) => JSON.stringify(v) }) : fc.array(items, constraints);
      }
      case 'object':
      default: {
        if (depth > 4 || !s.properties) return fc.constant({});
        const keys = Object.keys(s.properties).filter((k) => k !== 'userId' && k !== 'accessToken');
        const model = Object.fromEntries(keys.map((k) => [k, valueFor((s.properties as Record<string, Schema>)[k] as Schema, resolve, depth + 1)]));
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
  if (s.type === 'array' && s.maxItems !== undefined && s.items) return fc.constant(Array.from({ length: s.maxItems + 1 }, (_, i) => `item-${i}`));
  if (s.enum) return fc.constant('not-one-of-the-values');
  return null;
}
