import fs from 'node:fs';
import path from 'node:path';
import express, { type NextFunction, type Request, type RequestHandler, type Response, type Router } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import type { IdempotencyStore } from '../platform/idempotency';
import { projectRoot } from '../platform/paths';
import { authenticate } from './auth';
import type { ApiError } from '../platform/errors';
import { type HandlerMap, type OperationId, toExpressHandler } from './handler';
import { refuseUnstorableText } from './text-guard';

export const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

interface SchemaCheckOptions {
  version: string;
  validateApiSpec: boolean;
}
type SchemaValidatorClass = new (options: SchemaCheckOptions) => { validate(doc: unknown): { errors: unknown[] } };

/**
 * The library compiles a validator of the OpenAPI schema itself on every start, and uses it only
 * to check the document (`validateApiSpec`, on where answers are validated: tests): 130-220 ms of
 * each start-up otherwise spent for nothing. With the check off it now gets one that compiles
 * nothing and is never called. (A module of the pinned version, as `findStep` names its steps.)
 */
function compileSchemaValidatorOnlyToCheck(): void {
  const schemaValidator = require('express-openapi-validator/dist/framework/openapi.schema.validator') as { OpenAPISchemaValidator: SchemaValidatorClass };
  const Compiling = schemaValidator.OpenAPISchemaValidator;
  if (typeof Compiling !== 'function') throw new Error('express-openapi-validator has no OpenAPISchemaValidator: check the pinned version');
  const unused = {
    validate(): never {
      throw new Error('the document check is off');
    },
  };
  // Called with `new`: the object a constructor function returns is the instance.
  schemaValidator.OpenAPISchemaValidator = function OnlyToCheck(options: SchemaCheckOptions) {
    return options.validateApiSpec ? new Compiling(options) : unused;
  } as unknown as SchemaValidatorClass;
}
compileSchemaValidatorOnlyToCheck();

/** The bundled document (generated/openapi.json), which the service validates against and serves. */
export function loadApiDocument(): OpenAPIV3.DocumentV3 {
  const file = path.join(projectRoot, 'generated', 'openapi.json');
  const doc = JSON.parse(fs.readFileSync(file, 'utf8')) as OpenAPIV3.DocumentV3;
  if (doc.info?.version !== '1.0.0' || !doc.paths) throw new Error(`${file} is not the service's OpenAPI document`);
  return doc;
}

export interface ValidationOptions {
  validateResponses: boolean;
  /**
   * Whether the library checks the document against the OpenAPI schema at start-up (a tenth of
   * the start-up time). The document is generated, linted and contract-tested before it ships.
   */
  validateApiSpec: boolean;
  /** The largest JSON body (413 above). */
  bodyLimitBytes: number;
  /** Remembers the responses of operations that declare the `Idempotency-Key` header. */
  idempotency: IdempotencyStore;
  securityHandlers: Record<string, (req: Request) => Promise<boolean>>;
  /** Called when a request fails authentication: an error to answer instead of the 401 (a rate limit), or null. */
  onAuthFailure?: (req: Request) => Promise<ApiError | null>;
  /** Run after authentication and before request validation (choose the caller, check roles). */
  afterSecurity: RequestHandler[];
}

type Middleware = (req: Request, res: Response, next: NextFunction) => unknown;

function findStep(chain: Middleware[], name: string): number {
  const index = chain.findIndex((step) => step.name === name);
  if (index < 0) throw new Error(`express-openapi-validator has no "${name}" step: check the pinned version`);
  return index;
}

/**
 * The validator's middleware chain, rearranged so that:
 * - the operation lookup is done once per Express route and method, not once per request (the
 *   library otherwise compiles a path regex for every path of the document until one matches);
 *   Express has already matched the route, so its result is reused for later requests;
 * - response validation wraps every answer of the operation, including the errors of the steps
 *   after it;
 * - authentication is ours (`authenticate`, the document's security schemes and handlers), and
 *   `afterSecurity` runs between it and request validation;
 * - a JSON body is read only after both, so an anonymous or refused client cannot make the service
 *   wait for (or buffer) its body.
 * - text the database cannot store (NUL, lone surrogates) is refused right before validation.
 */
async function validatorChain(doc: OpenAPIV3.DocumentV3, options: ValidationOptions): Promise<Middleware[]> {
  // The document's server is `{base_url}` and its paths are absolute: validate paths as they are.
  const { servers: _servers, ...apiSpec } = structuredClone(doc);
  // Ajv checks a oneOf by its discriminator (one precise error instead of every branch's), but
  // refuses `mapping`, which the document keeps for generators; the branches' `mode` enums carry
  // the same values, so the validator's copy goes without it.
  for (const schema of Object.values(apiSpec.components?.schemas ?? {})) {
    if ('discriminator' in schema && schema.discriminator) delete schema.discriminator.mapping;
  }
  inlineOperationRefs(apiSpec as OpenAPIV3.DocumentV3);
  const chain = OpenApiValidator.middleware({
    apiSpec: apiSpec as OpenAPIV3.DocumentV3,
    validateApiSpec: options.validateApiSpec,
    validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false, removeAdditional: false, allErrors: true, discriminator: true },
    validateResponses: options.validateResponses ? { removeAdditional: false, coerceTypes: false } : false,
    validateSecurity: false, // `authenticate` (./auth) does it
    ignoreUndocumented: false,
  }) as Middleware[];

  // Load and check the document now: a document that fails to load must stop the start-up, not
  // answer 500 to every request. (The first step awaits the loaded document.)
  const pathParams = chain[findStep(chain, 'pathParamsMiddleware')] as Middleware;
  await new Promise<void>((resolve, reject) =>
    pathParams({ app: express() } as unknown as Request, {} as Response, (error?: unknown) =>
      error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(),
    ),
  );

  const metadataIndex = findStep(chain, 'metadataMiddleware');
  const lookup = chain[metadataIndex] as Middleware;
  const cache = new Map<string, Record<string, unknown>>();
  const cachedMetadata: Middleware = (req, res, next) => {
    // HEAD is GET without the body (Express answers it from the GET handler): same operation.
    const head = req.method === 'HEAD';
    const key = `${head ? 'GET' : req.method} ${(req.route as { path: string }).path}`;
    const hit = cache.get(key);
    if (hit) {
      (req as unknown as { openapi: unknown }).openapi = { ...hit, pathParams: req.params };
      return next();
    }
    if (head) req.method = 'GET';
    return lookup(req, res, (error?: unknown) => {
      if (head) req.method = 'HEAD';
      const found = (req as unknown as { openapi?: Record<string, unknown> }).openapi;
      if (!error && found) {
        const { pathParams: _params, ...reusable } = found;
        cache.set(key, reusable);
      }
      next(error);
    });
  };

  // The steps before the lookup (the path-params step) have done their only work above, loading
  // the document: per request they would only wait for it again.
  const steps: Middleware[] = [cachedMetadata];
  if (options.validateResponses) steps.push(chain[findStep(chain, 'responseMiddleware')] as Middleware);
  steps.push(authenticate(apiSpec.security, options.securityHandlers, options.onAuthFailure) as Middleware);
  steps.push(...(options.afterSecurity as Middleware[]));
  steps.push(jsonBodies(express.json({ limit: options.bodyLimitBytes, strict: false })) as Middleware);
  steps.push(refuseUnstorableText);
  steps.push(chain[findStep(chain, 'requestMiddleware')] as Middleware);
  return steps;
}

type Components = Record<string, Record<string, unknown> | undefined>;

/**
 * Replaces the `$ref`s of the operations' request bodies and responses, and of their media types'
 * schemas, with copies of the components they name (nested `$ref`s stay). The validator resolves
 * each such `$ref` at start-up by compiling the component into a validator of a throwaway Ajv
 * instance (about a tenth of the service's start-up); an inline object it takes as it is.
 */
function inlineOperationRefs(spec: OpenAPIV3.DocumentV3): void {
  const components = (spec.components ?? {}) as Components;
  const resolve = <T>(value: T | OpenAPIV3.ReferenceObject): T => {
    if (typeof value !== 'object' || value === null || !('$ref' in value)) return value as T;
    const [hash, root, section, name, ...rest] = value.$ref.split('/').map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
    const target = section && name ? components[section]?.[name] : undefined;
    if (hash !== '#' || root !== 'components' || rest.length > 0 || target === undefined) throw new Error(`cannot resolve ${value.$ref}`);
    return resolve(structuredClone(target) as T | OpenAPIV3.ReferenceObject);
  };
  const inlineContent = (content: Record<string, OpenAPIV3.MediaTypeObject> | undefined) => {
    for (const media of Object.values(content ?? {})) if (media.schema) media.schema = resolve(media.schema);
  };
  for (const item of Object.values(spec.paths) as OpenAPIV3.PathItemObject[]) {
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      if (operation.requestBody) {
        const body = resolve(operation.requestBody);
        inlineContent(body.content);
        operation.requestBody = body;
      }
      const responses = operation.responses ?? {};
      for (const [status, response] of Object.entries(responses)) {
        const resolved = resolve(response);
        inlineContent(resolved.content);
        responses[status] = resolved;
      }
    }
  }
}

export const toExpressPath = (openApiPath: string) => openApiPath.replace(/\{([^}]+)\}/g, ':$1');

/**
 * One Express route per path of the document, each running the validator chain and then the
 * handler of the operation; a method the path does not have is answered 405 by the validator.
 */
export async function apiRouter(
  doc: OpenAPIV3.DocumentV3,
  handlers: HandlerMap,
  options: ValidationOptions,
): Promise<Router> {
  const steps = await validatorChain(doc, options);
  const router = express.Router();
  for (const [openApiPath, item] of Object.entries(doc.paths)) {
    const route = router.route(toExpressPath(openApiPath));
    route.all(...(steps as RequestHandler[]));
    for (const method of METHODS) {
      const operation = (item as Record<string, OpenAPIV3.OperationObject | undefined>)[method];
      if (!operation) continue;
      const operationId = operation.operationId as OperationId | undefined;
      const handler = operationId ? handlers[operationId] : undefined;
      if (!operationId || !handler) throw new Error(`no handler for ${method.toUpperCase()} ${openApiPath}`);
      const idempotent = declaresIdempotencyKey(doc, operation);
      // On role-guarded (administration) operations a body userId names the target user.
      const userIdIsCaller = !(operation as { 'x-required-roles'?: unknown })['x-required-roles'];
      // `security: []`: no credentials needed, and the handler has no caller.
      const anonymous = Array.isArray(operation.security) && operation.security.length === 0;
      route[method](
        toExpressHandler(handler, {
          operationId,
          anonymous,
          userIdIsCaller,
          idempotency: idempotent ? options.idempotency : undefined,
          validateResponses: options.validateResponses,
        }),
      );
    }
  }
  return router;
}

/**
 * Parses a JSON body only for the operations whose document says they take one (the validator's
 * operation, its request body inlined by `inlineOperationRefs`), so that a streamed upload
 * reaches its handler untouched whatever its Content-Type.
 */
function jsonBodies(json: RequestHandler): Middleware {
  return function jsonBodyMiddleware(req, res, next) {
    const operation = (req as unknown as { openapi: { schema: OpenAPIV3.OperationObject } }).openapi.schema;
    // The validator's copy has `requestBody: null` on operations without one.
    const body = operation.requestBody as OpenAPIV3.RequestBodyObject | null | undefined;
    const takesJson = body?.content?.['application/json'] !== undefined;
    return takesJson ? json(req, res, next) : next();
  };
}

/** Whether the operation declares the `Idempotency-Key` request header. */
function declaresIdempotencyKey(doc: OpenAPIV3.DocumentV3, operation: OpenAPIV3.OperationObject): boolean {
  return (operation.parameters ?? []).some((parameter) => {
    const resolved =
      '$ref' in parameter
        ? doc.components?.parameters?.[parameter.$ref.split('/').pop() as string]
        : parameter;
    return resolved !== undefined && 'in' in resolved && resolved.in === 'header' && resolved.name.toLowerCase() === 'idempotency-key';
  });
}

/** The operationId of the request's operation, once the validator has identified it. */
export function operationIdOf(req: Request): string | undefined {
  return (req as unknown as { openapi?: { schema?: { operationId?: string } } }).openapi?.schema?.operationId;
}
