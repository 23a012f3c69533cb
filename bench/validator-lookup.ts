/**
 * In-process cost per request of request validation and the start-up time of each way to do it:
 * express-openapi-validator's middleware (operation lookup and request validation, through its
 * public API) mounted the usual way (one validator of the whole document: a path regex is compiled
 * for every path until one matches) and as the tests mount it (one validator per group of paths,
 * `validatorGroups` in src/http/openapi.ts), against the service's own validation (one per
 * operation, on its route: nothing to look up). Measured for the last path of the document that
 * has a GET (the worst case of the library's scan).
 */
import express, { type Request, type RequestHandler, type Response } from 'express';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { loadApiDocument, METHODS, pathValidators, validatorOf } from '../src/http/openapi';
import { RequestValidators } from '../src/http/request-validation';

const settings = { validateApiSpec: false, validateResponses: false };

async function perRequest(validator: RequestHandler[], url: string, iterations: number): Promise<number> {
  const app = express();
  const run = async (): Promise<void> => {
    const req = { method: 'GET', url, originalUrl: url, path: url.split('?')[0], baseUrl: '', app, params: {}, query: { limit: '5' }, headers: {}, cookies: {} } as unknown as Request;
    for (const step of validator) {
      const error = await new Promise<unknown>((resolve) => void step(req, {} as Response, resolve));
      if (error !== undefined) throw error instanceof Error ? error : new Error(JSON.stringify(error));
    }
  };
  for (let i = 0; i < 500; i += 1) await run();
  const started = process.hrtime.bigint();
  for (let i = 0; i < iterations; i += 1) await run();
  return Number(process.hrtime.bigint() - started) / 1000 / iterations;
}

async function timed<T>(build: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const built = await build();
  return [built, performance.now() - started];
}

export async function measureLookup(): Promise<Array<{ mounting: string; startupMs: number; perRequestUs: number }>> {
  const doc = loadApiDocument();
  const paths = Object.keys(doc.paths);
  const last = paths.filter((p) => (doc.paths[p] as OpenAPIV3.PathItemObject).get).pop() as string;
  const url = `${last.replace(/\{[^}]+\}/g, 'x')}?limit=5`;
  const [whole, wholeMs] = await timed(() => validatorOf(doc, paths, settings));
  const [grouped, groupedMs] = await timed(() => pathValidators(doc, settings));
  const groups = new Set(grouped.values()).size;
  const [own, ownMs] = await timed(async () => {
    // As the service builds them: one per operation of the document.
    const validators = new RequestValidators(doc);
    const built = new Map<OpenAPIV3.OperationObject, RequestHandler>();
    for (const item of Object.values(doc.paths) as OpenAPIV3.PathItemObject[]) {
      for (const method of METHODS) {
        const operation = item[method];
        if (operation) built.set(operation, validators.forOperation(item, operation));
      }
    }
    return [built.get((doc.paths[last] as OpenAPIV3.PathItemObject).get as OpenAPIV3.OperationObject) as RequestHandler];
  });
  return [
    { mounting: `one validator of the document (${paths.length} paths)`, startupMs: wholeMs, perRequestUs: await perRequest(whole, url, 3000) },
    { mounting: `the service's ${groups} validators`, startupMs: groupedMs, perRequestUs: await perRequest(grouped.get(last) as RequestHandler[], url, 3000) },
    { mounting: "the service's own, one per operation", startupMs: ownMs, perRequestUs: await perRequest(own, url, 3000) },
  ];
}

if (require.main === module) {
  measureLookup().then((rows) => console.table(rows));
}
