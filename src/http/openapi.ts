import fs from 'node:fs';
import path from 'node:path';
import express, { type Request, type RequestHandler, type Response, type Router } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import type { IdempotencyStore } from '../platform/idempotency';
import { projectRoot } from '../platform/paths';
import { authenticate } from './auth';
import { type ApiError, errors } from '../platform/errors';
import { type HandlerMap, type OperationId, toExpressHandler } from './handler';
import { refuseUnstorableText } from './text-guard';
import type { ApiOperation } from './operation';
import { type Components, resolveRef } from './document-refs';

export const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

type PathItem = Partial<Record<(typeof METHODS)[number], OpenAPIV3.OperationObject>>;

/** The bundled document (generated/openapi.json), which the service validates against and serves. */
export function loadApiDocument(): OpenAPIV3.DocumentV3 {
  const file = path.join(projectRoot, 'generated', 'openapi.json');
  const doc = JSON.parse(fs.readFileSync(file, 'utf8')) as OpenAPIV3.DocumentV3;
  if (doc.info?.version !== '1.0.0' || !doc.paths) throw new Error(`${file} is not the service's OpenAPI document`);
  return doc;
}

/** How express-openapi-validator is run: options of its public `middleware`. */
export interface ValidatorSettings {
  /** Whether answers are validated too (tests and development). */
  validateResponses: boolean;
  /**
   * Whether the library checks each document it is given against the OpenAPI schema at start-up.
   * The document is generated, linted and contract-tested before it ships.
   */
  validateApiSpec: boolean;
}

export interface ValidationOptions extends ValidatorSettings {
  /** The largest JSON body (413 above). */
  bodyLimitBytes: number;
  /** Remembers the responses of operations that declare the `Idempotency-Key` header. */
  idempotency: IdempotencyStore;
  securityHandlers: Record<string, (req: Request) => Promise<boolean>>;
  /** Called when a request fails authentication: an error to answer instead of the 401 (a rate limit), or null. */
  onAuthFailure?: (req: Request) => Promise<ApiError | null>;
  /** Run after authentication and before the body is read (choose the caller, rate limit, capability, roles). */
  afterSecurity: RequestHandler[];
}

/** The most paths given to one validator (see `validatorGroups`). */
const MAX_PATHS_PER_VALIDATOR = 8;

/**
 * The document's paths in groups, one library validator each: an area's paths (`/api/v1/<area>/…`)
 * stay together (a larger area's by its next segment), and areas are packed in document order into groups of at most
 * MAX_PATHS_PER_VALIDATOR paths. A validator matches each request against its paths one by one,
 * compiling each path's pattern until one matches, so small groups keep that search short; each
 * validator loads its document at start-up (docs/performance.md has the cost).
 */
export function validatorGroups(paths: string[]): string[][] {
  const byPrefix = (list: string[], segments: number) => {
    const parts = new Map<string, string[]>();
    for (const openApiPath of list) {
      const prefix = openApiPath.split('/').slice(0, segments).join('/');
      parts.set(prefix, [...(parts.get(prefix) ?? []), openApiPath]);
    }
    return [...parts.values()];
  };
  // An area with more paths than a group holds is split by its next segment (`/api/v1/admin/groups`).
  const areas = byPrefix(paths, 4).flatMap((area) => (area.length > MAX_PATHS_PER_VALIDATOR ? byPrefix(area, 5) : [area]));
  const groups: string[][] = [];
  for (const area of areas) {
    const room = groups.find((group) => group.length + area.length <= MAX_PATHS_PER_VALIDATOR);
    if (room) room.push(...area);
    else groups.push([...area]);
  }
  return groups;
}

/** The components (`#/components/<section>/<name>`) that `value` refers to, directly or through others. */
function componentsReachedFrom(value: unknown, all: Components): Components {
  const reached: Components = {};
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    for (const [key, child] of Object.entries(node)) {
      if (key !== '$ref' || typeof child !== 'string') {
        visit(child);
        continue;
      }
      const [, , section, name] = child.split('/');
      const target = section && name ? all[section]?.[name] : undefined;
      if (!section || !name || target === undefined) throw new Error(`cannot resolve ${child}`);
      const into = (reached[section] ??= {});
      if (name in into) continue;
      into[name] = target;
      visit(target);
    }
  };
  visit(value);
  return reached;
}

/**
 * The document a validator of `paths` is given: those paths, the components they use and the
 * security schemes. The document's server is `{base_url}` and its paths are absolute: without
 * `servers`, the validator matches a request's path against the paths as they are.
 */
function validatorDocument(doc: OpenAPIV3.DocumentV3, paths: string[]): OpenAPIV3.DocumentV3 {
  const { servers: _servers, components: all = {}, ...rest } = doc;
  const own = Object.fromEntries(paths.map((openApiPath) => [openApiPath, doc.paths[openApiPath]]));
  const components = { ...componentsReachedFrom(own, all as Components), securitySchemes: all.securitySchemes };
  const spec = structuredClone({ ...rest, paths: own, components }) as OpenAPIV3.DocumentV3;
  // Ajv checks a oneOf by its discriminator (one precise error instead of every branch's), but
  // refuses `mapping`, which the document keeps for generators; the branches' `mode` enums carry
  // the same values, so the validator's copy goes without it.
  for (const schema of Object.values(spec.components?.schemas ?? {})) {
    if ('discriminator' in schema && schema.discriminator) delete schema.discriminator.mapping;
  }
  inlineOperationRefs(spec);
  return spec;
}

/**
 * Replaces the `$ref`s of the operations' request bodies and responses, and of their media types'
 * schemas, with copies of the components they name (nested `$ref`s stay). The validator resolves
 * each such `$ref` at start-up by compiling the component into a validator of a throwaway Ajv
 * instance; an inline object it takes as it is.
 */
function inlineOperationRefs(spec: OpenAPIV3.DocumentV3): void {
  const components = (spec.components ?? {}) as Components;
  const inlineContent = (content: Record<string, OpenAPIV3.MediaTypeObject> | undefined) => {
    for (const media of Object.values(content ?? {})) if (media.schema) media.schema = resolveRef(components, media.schema);
  };
  for (const item of Object.values(spec.paths) as PathItem[]) {
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      if (operation.requestBody) {
        const body = resolveRef(components, operation.requestBody);
        inlineContent(body.content);
        operation.requestBody = anyContentType(body);
      }
      const responses = operation.responses ?? {};
      for (const [status, response] of Object.entries(responses)) {
        const resolved = resolveRef(components, response);
        inlineContent(resolved.content);
        responses[status] = resolved;
      }
    }
  }
}

/**
 * A raw request body marked `x-any-content-type` (an upload's bytes) is documented with one
 * concrete media type for generators and accepted with any `Content-Type`: the validator's copy
 * takes every type with the documented schema.
 */
function anyContentType(body: OpenAPIV3.RequestBodyObject): OpenAPIV3.RequestBodyObject {
  if (!(body as { 'x-any-content-type'?: boolean })['x-any-content-type']) return body;
  const [documented] = Object.values(body.content ?? {});
  return { ...body, content: { ...body.content, '*/*': documented ?? {} } };
}

/**
 * The library's middleware for a document, through its public options only: parameters coerced
 * to their types (the library always does) and given their defaults, unknown and empty query
 * parameters and unencoded reserved characters refused (`+` and `*` aside: formEncodedQuery),
 * bodies checked as they came. Security is the service's (`authenticate`, which runs before the
 * body is read); uploads are streamed to their handlers (no multipart parsing); handlers are the
 * service's routes.
 */
function validatorMiddleware(apiSpec: OpenAPIV3.DocumentV3, settings: ValidatorSettings): RequestHandler[] {
  return OpenApiValidator.middleware({
    apiSpec,
    validateApiSpec: settings.validateApiSpec,
    validateRequests: {
      allowUnknownQueryParameters: false,
      coerceTypes: false,
      removeAdditional: false,
      allErrors: true,
      discriminator: true,
    },
    validateResponses: settings.validateResponses ? { removeAdditional: false, coerceTypes: false } : false,
    validateSecurity: false,
    fileUploader: false,
    operationHandlers: false,
    ignoreUndocumented: false,
    $refParser: { mode: 'bundle' },
  }) as unknown as RequestHandler[];
}

/**
 * Sends a new validator a request for a method its first path does not have, and expects the 405
 * the service relies on: the validator has loaded its document (one it cannot load would
 * otherwise answer 500 to every request) and refuses methods the document does not declare.
 */
async function checkLoaded(validator: RequestHandler[], openApiPath: string, item: PathItem): Promise<void> {
  const method = METHODS.find((name) => !item[name])?.toUpperCase() ?? 'UNDECLARED';
  const url = openApiPath.replace(/\{[^}]+\}/g, 'x');
  // A request of its own app: the service's app only ever sees real requests.
  const req = {
    method,
    url,
    originalUrl: url,
    path: url,
    baseUrl: '',
    headers: {},
    query: {},
    params: {},
    app: express(),
  } as unknown as Request;
  for (const step of validator) {
    const error = await new Promise<unknown>((resolve) => void step(req, {} as Response, resolve));
    if (error === undefined) continue;
    if ((error as { status?: unknown }).status === 405) return;
    throw error instanceof Error ? error : new Error(String(error));
  }
  throw new Error(`express-openapi-validator did not answer ${method} ${openApiPath} with 405: check its version`);
}

/** A loaded validator of some of the document's paths. */
export async function validatorOf(doc: OpenAPIV3.DocumentV3, paths: string[], settings: ValidatorSettings): Promise<RequestHandler[]> {
  const validator = validatorMiddleware(validatorDocument(doc, paths), settings);
  const first = paths[0] as string;
  await checkLoaded(validator, first, doc.paths[first] as PathItem);
  return validator;
}

/** For each path of the document, the validator that knows it: one per group (`validatorGroups`). */
export async function pathValidators(doc: OpenAPIV3.DocumentV3, settings: ValidatorSettings): Promise<Map<string, RequestHandler[]>> {
  const byPath = new Map<string, RequestHandler[]>();
  for (const group of validatorGroups(Object.keys(doc.paths))) {
    const validator = await validatorOf(doc, group, settings);
    for (const openApiPath of group) byPath.set(openApiPath, validator);
  }
  return byPath;
}

/** HEAD is GET without the body (Express answers it with the GET route): the validator is shown GET. */
function headAsGet(step: RequestHandler): RequestHandler {
  return (req, res, next) => {
    if (req.method !== 'HEAD') return step(req, res, next);
    req.method = 'GET';
    return step(req, res, (error?: unknown) => {
      req.method = 'HEAD';
      next(error);
    });
  };
}

/**
 * Shows the validator the query with `+` and `*` percent-encoded. `+` is a space and `*` itself in
 * form encoding (what URLSearchParams and HTML forms write, and how Express reads the query), but
 * the library refuses both as unencoded reserved characters; the other reserved characters still
 * must be encoded.
 */
function formEncodedQuery(step: RequestHandler): RequestHandler {
  return (req, res, next) => {
    const original = req.originalUrl;
    const start = original.indexOf('?');
    if (start < 0 || !FORM_CHARACTERS.test(original.slice(start))) return step(req, res, next);
    req.originalUrl = original.slice(0, start) + original.slice(start).replace(/\+/g, '%20').replace(/\*/g, '%2A');
    return step(req, res, (error?: unknown) => {
      req.originalUrl = original;
      next(error);
    });
  };
}
const FORM_CHARACTERS = /[+*]/;

export const toExpressPath = (openApiPath: string) => openApiPath.replace(/\{([^}]+)\}/g, ':$1');

/** What the service reads of an operation of the document (its security falls back to the document's). */
function apiOperation(doc: OpenAPIV3.DocumentV3, operation: OpenAPIV3.OperationObject, operationId: OperationId): ApiOperation {
  const extensions = operation as Pick<ApiOperation, 'x-capability' | 'x-required-roles' | 'x-audit' | 'x-scope'>;
  return {
    operationId,
    security: operation.security ?? doc.security ?? [],
    'x-capability': extensions['x-capability'],
    'x-required-roles': extensions['x-required-roles'],
    'x-audit': extensions['x-audit'],
    'x-scope': extensions['x-scope'],
    statuses: new Set(Object.keys(operation.responses ?? {})),
    exactlyOneOf: exactlyOneOf(doc, operation),
  };
}

/** The fields of a JSON body schema whose `oneOf` variants each require one field and say nothing else (but a title). */
function exactlyOneOf(doc: OpenAPIV3.DocumentV3, operation: OpenAPIV3.OperationObject): string[] | undefined {
  const components = (doc.components ?? {}) as Components;
  const media = requestBodyOf(doc, operation)?.content?.['application/json'];
  type Alternatives = { oneOf?: Array<Alternatives | OpenAPIV3.ReferenceObject>; required?: string[] };
  const schema = media?.schema ? resolveRef<Alternatives>(components, media.schema) : undefined;
  const variants = schema?.oneOf?.map((variant) => resolveRef<Alternatives>(components, variant));
  if (!variants?.every((v) => v.required?.length === 1 && Object.keys(v).every((key) => key === 'required' || key === 'title')))
    return undefined;
  return variants.map((v) => v.required![0]!);
}

/** The 405 of a method the path does not have, with the methods it has. */
function methodNotAllowed(item: PathItem): RequestHandler {
  const allow = METHODS.filter((method) => item[method])
    .map((method) => method.toUpperCase())
    .join(', ');
  return (_req, _res, next) => next(errors.methodNotAllowed(allow));
}

/**
 * The API's routes, one Express route per path of the document, each method with the steps of the
 * document's operation in order:
 * - `req.operation`, the document's operation of the route;
 * - authentication (the document's security schemes and handlers) and `afterSecurity`, before
 *   anything reads the body, so that an anonymous or refused client cannot make the service wait
 *   for (or buffer) its body;
 * - the JSON body, read only for operations whose document says they take one (a streamed upload
 *   reaches its handler untouched whatever its Content-Type), then the refusal of text the
 *   database cannot store (NUL, lone surrogates, nesting too deep);
 * - express-openapi-validator's validator of the path's group (`pathValidators`);
 * - the handler.
 * Any other method is answered 405 with Allow.
 */
export async function apiRouter(doc: OpenAPIV3.DocumentV3, handlers: HandlerMap, options: ValidationOptions): Promise<Router> {
  const validators = await pathValidators(doc, options);
  const beforeBody = [authenticate(options.securityHandlers, options.onAuthFailure), ...options.afterSecurity];
  const json = express.json({ limit: options.bodyLimitBytes, strict: false });
  const router = express.Router();
  for (const [openApiPath, item] of Object.entries(doc.paths) as Array<[string, PathItem]>) {
    const validator = validators.get(openApiPath) ?? [];
    const route = router.route(toExpressPath(openApiPath));
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      const operationId = operation.operationId as OperationId | undefined;
      const handler = operationId ? handlers[operationId] : undefined;
      if (!operationId || !handler) throw new Error(`no handler for ${method.toUpperCase()} ${openApiPath}`);
      const described = apiOperation(doc, operation, operationId);
      const idempotent = declaresIdempotencyKey(doc, operation);
      // On role-guarded (administration) operations a body userId names the target user.
      const userIdIsCaller = !described['x-required-roles'];
      // `security: []`: no credentials needed, and the handler has no caller.
      const anonymous = described.security.length === 0;
      const body = requestBodyOf(doc, operation);
      route[method](
        (req, _res, next) => {
          req.operation = described;
          next();
        },
        ...beforeBody,
        ...(body?.content?.['application/json'] ? [json] : []),
        refuseUnstorableText,
        ...validator.map((step) => formEncodedQuery(method === 'get' ? headAsGet(step) : step)),
        toExpressHandler(handler, {
          operationId,
          anonymous,
          userIdIsCaller,
          idempotency: idempotent ? options.idempotency : undefined,
        }),
      );
    }
    route.all(methodNotAllowed(item));
  }
  return router;
}

/** The operation's request body, resolved. */
function requestBodyOf(doc: OpenAPIV3.DocumentV3, operation: OpenAPIV3.OperationObject): OpenAPIV3.RequestBodyObject | undefined {
  return operation.requestBody
    ? resolveRef<OpenAPIV3.RequestBodyObject>((doc.components ?? {}) as Components, operation.requestBody)
    : undefined;
}

/** Whether the operation declares the `Idempotency-Key` request header. */
function declaresIdempotencyKey(doc: OpenAPIV3.DocumentV3, operation: OpenAPIV3.OperationObject): boolean {
  return (operation.parameters ?? []).some((parameter) => {
    const resolved = resolveRef((doc.components ?? {}) as Components, parameter);
    return resolved.in === 'header' && resolved.name.toLowerCase() === 'idempotency-key';
  });
}

/** The operationId of the request's operation (unset for paths and methods the document does not have). */
export function operationIdOf(req: Request): OperationId | undefined {
  return req.operation?.operationId;
}
