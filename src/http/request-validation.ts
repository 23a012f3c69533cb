import type { Request, RequestHandler } from 'express';
import Ajv, { type ErrorObject, type Options, type ValidateFunction } from 'ajv-draft-04';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { type ApiError, bodyNotJson, type ErrorDetail, errors } from '../platform/errors';
import { type Components, resolveRef } from './document-refs';

/**
 * Request validation owned by the service, one validator per operation of the document, built
 * when its route is (Express has matched the route, so nothing is looked up per request) and
 * compiled on its first request. It answers as express-openapi-validator does with the options
 * the service gave it (which the tests keep running after it as a second check): the same
 * coercion of parameters, defaults, error paths and messages, unknown and empty query parameters,
 * unencoded reserved characters and media types. Where the library let through what the document
 * refuses, it refuses: a left-out body the document requires, int64 beyond 64 bits.
 */

type Schema = Record<string, unknown>;

/** The id under which the document's components are known to the validators' Ajv instances. */
const DOCUMENT_ID = 'openapi.json';

/** Characters a query value must percent-encode (the library's check, for parameters without `allowReserved`). */
const RESERVED = /[:/?#[\]@!$&'()*+,;=]/;
/** The same but `&` and `=`, which separate the pairs: a query without these has no reserved value. */
const RESERVED_IN_VALUES = /[:/?#[\]@!$'()*+,;]/;

const integerWithin = (bits: number) => ({
  type: 'number' as const,
  validate: (value: number) => Number.isInteger(value) && value <= 2 ** (bits - 1) - 1 && value >= -(2 ** (bits - 1)),
});
/** The OpenAPI formats Ajv does not know (binary bodies are not checked). */
const FORMATS = {
  int32: integerWithin(32),
  int64: integerWithin(64),
  byte: (value: string) => value.length % 4 === 0 && /^[A-Za-z0-9+/]*(=|==)?$/.test(value),
  binary: () => true,
  password: () => true,
};

function ajvOf(coerceTypes: boolean, components: Schema): Ajv {
  const options: Options = {
    strict: false,
    strictNumbers: true,
    strictTuples: true,
    allowUnionTypes: false,
    validateSchema: false,
    allErrors: true,
    discriminator: true,
    coerceTypes,
    useDefaults: true,
    removeAdditional: false,
    formats: FORMATS,
  };
  const ajv = new Ajv(options);
  ajv.addSchema({ components }, DOCUMENT_ID);
  return ajv;
}

/** A deep copy of `value` whose `#/…` references point into the validators' copy of the document. */
function anchored<T>(value: T): T {
  return JSON.parse(JSON.stringify(value), (key, item: unknown) =>
    key === '$ref' && typeof item === 'string' && item.startsWith('#/') ? `${DOCUMENT_ID}${item}` : item,
  ) as T;
}

/** The document's validators: two Ajv instances over one copy of its components. */
export class RequestValidators {
  private readonly components: Components;
  private readonly doc: OpenAPIV3.DocumentV3;
  /** Parameters: strings coerced to their schema's type. */
  private readonly parameters: Ajv;
  /** Bodies: JSON as it came. */
  private readonly bodies: Ajv;

  constructor(doc: OpenAPIV3.DocumentV3) {
    this.doc = doc;
    this.components = (doc.components ?? {}) as Components;
    const copy = structuredClone(this.components);
    // Ajv checks a oneOf by its discriminator but refuses `mapping`, which the document keeps for
    // generators; the branches' enums carry the same values.
    for (const schema of Object.values(copy.schemas ?? {}) as Array<{ discriminator?: { mapping?: unknown } }>) {
      if (schema.discriminator) delete schema.discriminator.mapping;
    }
    this.parameters = ajvOf(true, copy);
    this.bodies = ajvOf(false, copy);
  }

  /** The validator of one operation (`pathItem` gives the path's own parameters). */
  forOperation(pathItem: OpenAPIV3.PathItemObject, operation: OpenAPIV3.OperationObject): RequestHandler {
    const check = new OperationCheck(this.describe(pathItem, operation), this.parameters, this.bodies);
    return (req, _res, next) => {
      check.run(req);
      next();
    };
  }

  private describe(pathItem: OpenAPIV3.PathItemObject, operation: OpenAPIV3.OperationObject): OperationShape {
    const byKey = new Map<string, OpenAPIV3.ParameterObject>();
    for (const parameter of [...(pathItem.parameters ?? []), ...(operation.parameters ?? [])]) {
      const resolved = resolveRef<OpenAPIV3.ParameterObject>(this.components, parameter);
      byKey.set(`${resolved.in}:${resolved.name}`, resolved);
    }
    // Each location's schema: `{}` until the operation has a parameter there.
    const locations: Record<'query' | 'headers' | 'params', { properties?: Schema; required?: string[] }> = { query: {}, headers: {}, params: {} };
    const query: QueryParameter[] = [];
    for (const parameter of byKey.values()) {
      const location = parameter.in === 'query' ? 'query' : parameter.in === 'header' ? 'headers' : parameter.in === 'path' ? 'params' : null;
      if (!location) throw new Error(`parameters in ${parameter.in} are not supported (${parameter.name})`);
      const name = location === 'headers' ? parameter.name.toLowerCase() : parameter.name;
      const into = locations[location];
      if (!into.properties) Object.assign(into, { type: 'object', properties: {} });
      (into.properties as Schema)[name] = anchored(parameter.schema ?? {});
      if (parameter.required) (into.required ??= []).push(name);
      if (location === 'query') {
        // A query parameter's `explode` is true unless the document says otherwise (form style).
        query.push({ name, allowEmpty: !!parameter.allowEmptyValue, allowReserved: !!parameter.allowReserved, explode: parameter.explode ?? true });
      }
    }
    // API keys sent in the query (a signed URL's token) are parameters of the operations they secure.
    for (const requirement of operation.security ?? this.doc.security ?? []) {
      for (const schemeName of Object.keys(requirement)) {
        const scheme = resolveRef<OpenAPIV3.SecuritySchemeObject>(this.components, this.doc.components?.securitySchemes?.[schemeName] ?? {} as OpenAPIV3.SecuritySchemeObject);
        if (scheme.type === 'apiKey' && scheme.in === 'query') query.push({ name: scheme.name, allowEmpty: false, allowReserved: true, explode: true });
      }
    }
    const body = operation.requestBody ? resolveRef<OpenAPIV3.RequestBodyObject>(this.components, operation.requestBody) : undefined;
    return {
      parameters: { required: ['query', 'headers', 'params'], properties: locations },
      query,
      body: body && {
        notRequired: body.required === false,
        content: Object.entries(body.content ?? {}).map(([type, media]) => ({
          type: MediaType.of(type),
          schema: anchored(media.schema ?? {}) as Schema,
          // A request without a body is refused where the document requires one, or where its
          // schema has required properties.
          required: body.required === true || (resolveRef<OpenAPIV3.SchemaObject>(this.components, media.schema ?? {}).required?.length ?? 0) > 0,
        })),
      },
    };
  }
}

interface QueryParameter {
  name: string;
  allowEmpty: boolean;
  allowReserved: boolean;
  explode: boolean;
}

interface OperationShape {
  /** The schema of `{ query, headers, params }`. */
  parameters: Schema;
  query: QueryParameter[];
  body?: { notRequired: boolean; content: BodyContent[] };
}

interface BodyContent {
  type: MediaType;
  schema: Schema;
  /** Whether the body may not be left out. */
  required: boolean;
}

/** A media type and its parameters, compared as the library compares them. */
class MediaType {
  constructor(
    readonly type: string | null,
    readonly parameters: Record<string, string>,
  ) {}

  static of(header: string | undefined): MediaType {
    if (!header) return new MediaType(null, {});
    const parameters: Record<string, string> = {};
    for (const [, key = '', value = ''] of header.matchAll(/;\s*([^=]+)=([^;]+)/g)) {
      parameters[key.toLowerCase()] = key.toLowerCase() === 'charset' ? value.toLowerCase() : value;
    }
    return new MediaType(header.split(';')[0]?.toLowerCase().trim() ?? null, parameters);
  }

  /** The type with its parameters in order, `boundary` left out (undefined without a type). */
  normalized(): string | undefined {
    if (!this.type) return undefined;
    const parameters = Object.keys(this.parameters)
      .sort()
      .filter((key) => key !== 'boundary')
      .map((key) => `; ${key}=${this.parameters[key]}`);
    return this.type + parameters.join('');
  }
}

/**
 * The request's query, parsed once and kept on the request: Express 5 parses it again on every
 * read of `req.query`. The kept object is the request's own (the validation coerces it in place).
 */
export function keepQuery(req: Request): Record<string, unknown> {
  if (Object.hasOwn(req, 'query')) return req.query as Record<string, unknown>;
  const query = { ...(req.query as Record<string, unknown>) };
  Object.defineProperty(req, 'query', { value: query, writable: true, configurable: true, enumerable: true });
  return query;
}

/** The validation of one operation's requests, compiled on its first request. */
class OperationCheck {
  private parameterCheck?: ValidateFunction;
  private readonly bodyChecks = new Map<BodyContent, ValidateFunction>();

  constructor(
    private readonly shape: OperationShape,
    private readonly parameterAjv: Ajv,
    private readonly bodyAjv: Ajv,
  ) {}

  run(req: Request): void {
    const content = this.bodyContent(req);
    const query = keepQuery(req);
    if (this.shape.query.length > 0) this.refuseReserved(req.originalUrl);
    this.refuseUnknownQuery(query);
    const parameters = (this.parameterCheck ??= this.parameterAjv.compile(this.shape.parameters));
    const parametersValid = parameters({ query, headers: req.headers, params: req.params });
    let body: ValidateFunction | undefined;
    let bodyValid = true;
    if (content) {
      body = this.bodyChecks.get(content);
      if (!body) {
        body = this.bodyAjv.compile({ properties: { body: content.schema }, ...(content.required ? { required: ['body'] } : {}) });
        this.bodyChecks.set(content, body);
      }
      bodyValid = body({ body: req.body as unknown });
    }
    if (parametersValid && bodyValid) return;
    throw invalid([...(parameters.errors ?? []), ...(body?.errors ?? [])]);
  }

  /**
   * The operation's media type of the request's body (undefined when there is none to check), or a
   * refusal of its media type: the operation's media types are tried exactly, then without the
   * request's parameters or with `charset=utf-8`, then as wildcards (`*\/*`, `application/*`).
   */
  private bodyContent(req: Request): BodyContent | undefined {
    const body = this.shape.body;
    if (!body) return undefined;
    const sent = MediaType.of(req.headers['content-type']);
    const normalized = sent.normalized();
    let match = body.content.find((media) => media.type.normalized() === normalized);
    if (!match && sent.type) {
      const equivalents = [sent.type];
      if (!sent.parameters.charset) equivalents.push(MediaType.of(`${req.headers['content-type']}; charset=utf-8`).normalized() as string);
      match = body.content.find((media) => equivalents.includes(media.type.normalized() as string));
    }
    if (!match) {
      const wildcards = [...body.content].sort((a, b) => ((a.type.type ?? '') < (b.type.type ?? '') ? 1 : -1));
      match = wildcards.find((media) => {
        const type = media.type.type ?? '';
        if (type === '*/*') return true;
        return /^[a-z]+\/\*$/.test(type) && normalized !== undefined && normalized.startsWith(type.slice(0, -1));
      });
    }
    if (!match) {
      if (normalized === undefined && body.notRequired) return undefined;
      throw bodyNotJson();
    }
    if (match.schema.format === 'binary') return undefined;
    return match;
  }

  /** Values of declared query parameters must percent-encode reserved characters (commas separate values). */
  private refuseReserved(url: string): void {
    const start = url.indexOf('?');
    if (start < 0) return;
    // A `#` ends the query, as it does for Express's parser.
    const end = url.indexOf('#', start);
    const query = url.slice(start + 1, end < 0 ? undefined : end);
    if (!RESERVED_IN_VALUES.test(query)) return;
    const raw = new Map<string, string[]>();
    for (const pair of query.split('&')) {
      const [key = '', value] = pair.split('=');
      raw.set(key, [...(raw.get(key) ?? []), value as string]);
    }
    for (const parameter of this.shape.query) {
      if (parameter.allowReserved) continue;
      for (const value of raw.get(parameter.name) ?? []) {
        for (const part of parameter.explode ? [value] : (value?.split(',') ?? [])) {
          if (part !== undefined && RESERVED.test(part)) {
            throw invalidDetail(`/query/${parameter.name}`, `Parameter '${parameter.name}' must be url encoded. Its value may not contain reserved characters.`);
          }
        }
      }
    }
  }

  private refuseUnknownQuery(query: Record<string, unknown>): void {
    for (const name of Object.keys(query)) {
      const declared = this.shape.query.find((parameter) => parameter.name === name);
      if (!declared) throw invalidDetail(`/query/${name}`, `Unknown query parameter '${name}'`);
      if (!declared.allowEmpty && query[name] === '') throw invalidDetail(`/query/${name}`, `Empty value found for query parameter '${name}'`);
    }
  }
}

function invalidDetail(path: string, message: string): ApiError {
  return errors.invalidRequest('The request is not valid.', [{ path, message }]);
}

/** Ajv's errors as the service's details: the path of the missing or extra property, enums with their values. */
function invalid(found: ErrorObject[]): ApiError {
  const details: ErrorDetail[] = found.map((error) => {
    const params = error.params as { missingProperty?: string; additionalProperty?: string; allowedValues?: unknown[] };
    const property = params.missingProperty ?? params.additionalProperty;
    const message = error.keyword === 'enum' && params.allowedValues ? `${error.message}: ${params.allowedValues.join(', ')}` : (error.message ?? 'is not valid');
    return { path: property !== undefined ? `${error.instancePath}/${property}` : error.instancePath || '/', message };
  });
  return errors.invalidRequest('The request is not valid.', details);
}
