import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';

/** The document's components by section and name (`#/components/<section>/<name>`). */
export type Components = Record<string, Record<string, unknown> | undefined>;

/** A copy of the component a `$ref` names (`#/components/<section>/<name>`), or the value itself. */
export function resolveRef<T>(components: Components, value: T | OpenAPIV3.ReferenceObject): T {
  if (typeof value !== 'object' || value === null || !('$ref' in value)) return value as T;
  const [hash, root, section, name, ...rest] = value.$ref.split('/').map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  const target = section && name ? components[section]?.[name] : undefined;
  if (hash !== '#' || root !== 'components' || rest.length > 0 || target === undefined) throw new Error(`cannot resolve ${value.$ref}`);
  return resolveRef(components, structuredClone(target) as T | OpenAPIV3.ReferenceObject);
}
