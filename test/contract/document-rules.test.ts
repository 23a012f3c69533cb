import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { type Components, resolveRef } from '../../src/http/document-refs';
import { loadApiDocument, METHODS } from '../../src/http/openapi';

// The rules the document states beyond plain schemas (`x-query-or-body`, `x-field-rules`) name
// what exists, and its examples agree with each other, as a generator or a reader takes them.
const doc = loadApiDocument();
const components = (doc.components ?? {}) as Components;
interface Schema {
  example?: Record<string, unknown>;
  enum?: unknown[];
  allOf?: Schema[];
  required?: string[];
  properties?: Record<string, Schema>;
  'x-field-rules'?: FieldRule[];
}
interface FieldRule {
  if: Record<string, unknown>;
  required?: string[];
  absent?: string[];
}

function operations(): Array<{ where: string; operation: OpenAPIV3.OperationObject & { 'x-query-or-body'?: QueryOrBody } }> {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const operation = (item as Record<string, OpenAPIV3.OperationObject | undefined>)[method];
      if (operation) out.push({ where: `${method.toUpperCase()} ${path}`, operation });
    }
  }
  return out;
}
interface QueryOrBody {
  required: string[];
  optional?: string[];
}

const jsonBody = (operation: OpenAPIV3.OperationObject) => {
  if (!operation.requestBody) return undefined;
  const media = resolveRef<OpenAPIV3.RequestBodyObject>(components, operation.requestBody).content?.['application/json'];
  return media
    ? { example: media.example as Record<string, unknown> | undefined, schema: resolveRef<Schema>(components, media.schema as Schema) }
    : undefined;
};
const queryParameters = (operation: OpenAPIV3.OperationObject) =>
  (operation.parameters ?? []).map((p) => resolveRef<OpenAPIV3.ParameterObject>(components, p)).filter((p) => p.in === 'query');
const exampleOf = (schema: unknown): unknown => {
  if (!schema) return undefined;
  const resolved = resolveRef<Schema>(components, schema as Schema);
  return resolved.example ?? resolved.allOf?.map(exampleOf).find((e) => e !== undefined);
};

describe('the rules the document states', () => {
  test('each operation names the access-token scope it needs, and role-guarded ones need admin', () => {
    const scopes = (components.schemas?.AccessTokenScope as { enum: string[] }).enum;
    const problems = [];
    for (const { where, operation } of operations()) {
      const scope = (operation as { 'x-scope'?: string })['x-scope'];
      const guarded = (operation as { 'x-required-roles'?: string[] })['x-required-roles'] !== undefined;
      if (!scope || !scopes.includes(scope)) problems.push(`${where}: x-scope ${scope ?? 'missing'}`);
      else if (guarded !== (scope === 'admin')) problems.push(`${where}: x-scope ${scope} with${guarded ? '' : 'out'} x-required-roles`);
      const anonymous = operation.security?.length === 0;
      if (!anonymous && !operation.responses?.['403']) problems.push(`${where}: no 403 for a token without the scope`);
    }
    expect(problems).toEqual([]);
  });

  test('each DELETE that takes its id in the query or the body says so, with examples that agree', () => {
    const deletes = operations().filter(({ where }) => where.startsWith('DELETE '));
    let checked = 0;
    for (const { where, operation } of deletes) {
      const body = jsonBody(operation);
      const rule = operation['x-query-or-body'];
      const both = queryParameters(operation).filter((p) => body?.schema.properties?.[p.name]);
      if (both.length === 0) {
        expect({ where, rule }).toEqual({ where, rule: undefined });
        continue;
      }
      expect({ where, names: [...rule!.required, ...(rule!.optional ?? [])].sort() }).toEqual({
        where,
        names: both.map((p) => p.name).sort(),
      });
      const response = resolveRef<OpenAPIV3.ResponseObject>(components, operation.responses!['200']!).content?.['application/json'];
      for (const parameter of both) {
        // Optional in both places (one of them must give a required one: the server says 400).
        expect({ where, name: parameter.name, required: parameter.required ?? false }).toEqual({
          where,
          name: parameter.name,
          required: false,
        });
        expect(body!.schema.required ?? []).not.toContain(parameter.name);
        const inQuery = parameter.example ?? exampleOf(parameter.schema);
        const inBody = body!.example?.[parameter.name] ?? body!.schema.example?.[parameter.name];
        if (inBody !== undefined)
          expect({ where, name: parameter.name, inQuery }).toEqual({ where, name: parameter.name, inQuery: inBody });
        const answered = (response?.example as Record<string, unknown> | undefined)?.[parameter.name];
        if (answered !== undefined)
          expect({ where, name: parameter.name, answered }).toEqual({ where, name: parameter.name, answered: inQuery });
      }
      checked += 1;
    }
    expect(checked).toBeGreaterThanOrEqual(14);
  });

  test('x-field-rules name the schema’s own fields and values', () => {
    const ruled = Object.entries(doc.components?.schemas ?? {}).filter(([, schema]) => (schema as Schema)['x-field-rules']);
    expect(ruled.map(([name]) => name).sort()).toEqual([
      'FileCreateRequest',
      'McpServerCreateRequest',
      'ModelConnectionCreateRequest',
      'ModelConnectionTestRequest',
    ]);
    for (const [name, schema] of ruled) {
      const properties = (schema as Schema).properties ?? {};
      for (const rule of (schema as Schema)['x-field-rules']!) {
        for (const [field, value] of Object.entries(rule.if)) {
          const property = resolveRef<Schema>(components, properties[field]!);
          const values = property.enum ?? property.allOf?.flatMap((part) => resolveRef<Schema>(components, part).enum ?? []);
          expect({ name, field, value, known: values?.includes(value) }).toEqual({ name, field, value, known: true });
        }
        for (const field of [...(rule.required ?? []), ...(rule.absent ?? [])]) expect(Object.keys(properties)).toContain(field);
      }
    }
  });
});
