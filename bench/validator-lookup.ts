/**
 * In-process cost of finding the operation of a request, as express-openapi-validator does it when
 * mounted the usual way (one app-level middleware: a path regex is compiled for every path of the
 * document until one matches) against the service's mounting (the lookup is done once per Express
 * route and reused). Measured on the service's document and on the same document grown to 45
 * paths, for the last path of the document that has a GET (the worst case of the scan).
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { loadApiDocument, toExpressPath } from '../src/http/openapi';

type Middleware = (req: Request, res: Response, next: NextFunction) => unknown;

function withExtraPaths(doc: OpenAPIV3.DocumentV3, total: number): OpenAPIV3.DocumentV3 {
  const grown = structuredClone(doc);
  const template = grown.paths['/api/v1/capabilities'] as OpenAPIV3.PathItemObject;
  const paths: OpenAPIV3.PathsObject = {};
  for (let i = 0; Object.keys(doc.paths).length + i < total; i += 1) {
    paths[`/api/v1/extra-${i}/{itemId}`] = {
      get: { ...(template.get as OpenAPIV3.OperationObject), operationId: `extra${i}`, parameters: [{ name: 'itemId', in: 'path', required: true, schema: { type: 'string' } }] },
    };
  }
  grown.paths = { ...paths, ...grown.paths };
  return grown;
}

async function lookupCost(doc: OpenAPIV3.DocumentV3, cached: boolean, iterations: number): Promise<number> {
  const { servers: _servers, ...apiSpec } = doc;
  const chain = OpenApiValidator.middleware({ apiSpec: apiSpec as OpenAPIV3.DocumentV3, validateRequests: true, validateSecurity: false }) as Middleware[];
  const metadata = chain.find((m) => m.name === 'metadataMiddleware') as Middleware;
  const app = express();
  const paths = Object.keys(doc.paths).filter((p) => (doc.paths[p] as OpenAPIV3.PathItemObject).get);
  const last = paths[paths.length - 1] as string;
  const url = last.replace(/\{[^}]+\}/g, 'x');
  const routePath = toExpressPath(last);
  const cache = new Map<string, unknown>();
  const run = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = { method: 'GET', url, originalUrl: url, path: url, baseUrl: '', app, params: {}, route: { path: routePath }, query: {}, headers: {} } as unknown as Request & { openapi?: unknown };
      const key = `GET ${routePath}`;
      const hit = cached ? cache.get(key) : undefined;
      if (hit) {
        req.openapi = { ...(hit as object), pathParams: req.params };
        return resolve();
      }
      metadata(req, {} as Response, (error?: unknown) => {
        if (error) return reject(error as Error);
        if (cached) cache.set(key, req.openapi);
        resolve();
      });
    });
  for (let i = 0; i < 200; i += 1) await run(); // warm up (and load the document)
  const started = process.hrtime.bigint();
  for (let i = 0; i < iterations; i += 1) await run();
  return Number(process.hrtime.bigint() - started) / 1000 / iterations;
}

export async function measureLookup(): Promise<Array<{ document: string; library: number; service: number }>> {
  const doc = loadApiDocument();
  const rows = [];
  for (const [name, d] of [[`service document (${Object.keys(doc.paths).length} paths)`, doc], ['grown to 45 paths', withExtraPaths(doc, 45)]] as const) {
    rows.push({ document: name, library: await lookupCost(d, false, 5000), service: await lookupCost(d, true, 5000) });
  }
  return rows;
}

if (require.main === module) {
  measureLookup().then((rows) => console.table(rows));
}
