/**
 * The part of JSON Schema the built-in tools' inputs use (objects of strings, integers, booleans,
 * enums and string arrays), checked here: a model's arguments are untrusted input.
 */
export interface InputSchema {
  type: 'object';
  properties: Record<string, PropertySchema>;
  required?: string[];
  additionalProperties: false;
}

export type PropertySchema =
  | { type: 'string'; description?: string; minLength?: number; maxLength?: number; enum?: string[]; pattern?: string }
  | { type: 'integer'; description?: string; minimum?: number; maximum?: number }
  | { type: 'boolean'; description?: string }
  | { type: 'array'; description?: string; items: { type: 'string'; enum?: string[] }; minItems?: number; maxItems?: number; uniqueItems?: boolean };

const chars = (text: string) => [...text].length;

/** The problems of `value` against one property's schema, each naming the property. */
function problemsOf(name: string, schema: PropertySchema, value: unknown): string[] {
  switch (schema.type) {
    case 'string': {
      if (typeof value !== 'string') return [`${name} must be a string`];
      if (schema.minLength !== undefined && chars(value) < schema.minLength) return [`${name} must have at least ${schema.minLength} characters`];
      if (schema.maxLength !== undefined && chars(value) > schema.maxLength) return [`${name} must have at most ${schema.maxLength} characters`];
      if (schema.enum && !schema.enum.includes(value)) return [`${name} must be one of ${schema.enum.join(', ')}`];
      if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value)) return [`${name} must match ${schema.pattern}`];
      return [];
    }
    case 'integer':
      if (typeof value !== 'number' || !Number.isInteger(value)) return [`${name} must be an integer`];
      if (schema.minimum !== undefined && value < schema.minimum) return [`${name} must be at least ${schema.minimum}`];
      if (schema.maximum !== undefined && value > schema.maximum) return [`${name} must be at most ${schema.maximum}`];
      return [];
    case 'boolean':
      return typeof value === 'boolean' ? [] : [`${name} must be a boolean`];
    case 'array': {
      if (!Array.isArray(value)) return [`${name} must be an array`];
      if (schema.minItems !== undefined && value.length < schema.minItems) return [`${name} must have at least ${schema.minItems} items`];
      if (schema.maxItems !== undefined && value.length > schema.maxItems) return [`${name} must have at most ${schema.maxItems} items`];
      if (schema.uniqueItems && new Set(value).size !== value.length) return [`${name} must not repeat items`];
      return value.flatMap((item, i) => problemsOf(`${name}[${i}]`, { type: 'string', enum: schema.items.enum }, item));
    }
  }
}

/** The problems of `args` against `schema` (empty when they are valid). */
export function checkArguments(schema: InputSchema, args: unknown): string[] {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return ['the arguments must be a JSON object'];
  const record = args as Record<string, unknown>;
  const problems: string[] = [];
  for (const name of schema.required ?? []) if (record[name] === undefined) problems.push(`${name} is required`);
  for (const [name, value] of Object.entries(record)) {
    const property = schema.properties[name];
    if (!property) problems.push(`${name} is not a known argument`);
    else if (value !== undefined) problems.push(...problemsOf(name, property, value));
  }
  return problems;
}
