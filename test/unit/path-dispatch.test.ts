import express, { type Router } from 'express';
import supertest from 'supertest';
import { loadApiDocument, METHODS, toExpressPath } from '../../src/http/openapi';
import { dispatchByPath, PathIndex } from '../../src/http/path-dispatch';

/**
 * The path index finds the route Express's own router would (one router holding every path's
 * route, in the document's order), whatever the request path looks like: each answer names the
 * template whose route answered.
 */
const doc = loadApiDocument();
const templates = Object.keys(doc.paths);

function answering(template: string) {
  return (req: express.Request, res: express.Response) => {
    res.json({ template, params: req.params });
  };
}

/** Every path's methods on one router, as the service served them before the index. */
function oneRouter(): Router {
  const router = express.Router();
  for (const template of templates) {
    const route = router.route(toExpressPath(template));
    for (const method of METHODS) if ((doc.paths[template] as Record<string, unknown>)[method]) route[method](answering(template));
    route.all((_req, res) => res.status(405).json({ template }));
  }
  return router;
}

/** The same routes, a router per path, behind the index. */
function indexed() {
  return dispatchByPath(
    templates.map((template) => {
      const router = express.Router();
      const route = router.route(toExpressPath(template));
      for (const method of METHODS) if ((doc.paths[template] as Record<string, unknown>)[method]) route[method](answering(template));
      route.all((_req, res) => res.status(405).json({ template }));
      return { template, handler: router };
    }),
  );
}

function appWith(handler: express.RequestHandler) {
  const app = express();
  app.use(handler);
  app.use((_req, res) => res.status(404).json({ template: null }));
  app.use(((error, _req, res, _next) => res.status(400).json({ error: String(error) })) as express.ErrorRequestHandler);
  return supertest(app);
}

/** Request paths for a template: as written, in capitals, with a trailing slash, encoded, one segment more or less. */
function variants(template: string): string[] {
  const filled = template.replace(/\{[^}]+\}/g, (_m, name: string) => `${name}-1`);
  return [
    filled,
    filled.toUpperCase(),
    `${filled}/`,
    `${filled}//`,
    `${filled}/extra`,
    filled.split('/').slice(0, -1).join('/'),
    filled.replace(/-1/g, '%E2%82%AC'),
    filled.replace(/-1/g, '%ZZ'),
    template.replace(/\{[^}]+\}/g, 'search'),
  ];
}

describe('path dispatch', () => {
  const before = appWith(oneRouter());
  const after = appWith(indexed());

  test('answers every documented path, and its variants, as one router over all paths does', async () => {
    const paths = [...new Set(templates.flatMap(variants)), '/', '/api', '/api/v1', '/nowhere', '/API/V1/NOTES?limit=2'];
    for (const path of paths) {
      for (const method of ['get', 'post', 'delete', 'head'] as const) {
        const [a, b] = await Promise.all([before[method](path), after[method](path)]);
        expect({ path, method, status: b.status, body: b.body }).toEqual({ path, method, status: a.status, body: a.body });
      }
    }
  });

  test('the index names the templates a path may match, in order, and none for another path', () => {
    const index = new PathIndex(['/a/{id}', '/a/search', '/a/{id}/b', '/c']);
    expect(index.candidates('/a/search')).toEqual([0, 1]);
    expect(index.candidates('/A/Search/')).toEqual([0, 1]);
    expect(index.candidates('/a/7/b')).toEqual([2]);
    expect(index.candidates('/a/7/c')).toEqual([]);
    expect(index.candidates('/c/d')).toEqual([]);
    expect(index.candidates('/')).toEqual([]);
  });

  /** `/x/{id}`, whose route ends with `first`, before `/x/y`, which answers `{ second: true }`. */
  function twoTemplates(first: express.RequestHandler) {
    const parameter = express.Router();
    parameter.get('/x/:id', first);
    const literal = express.Router();
    literal.get('/x/y', (_req, res) => res.json({ second: true }));
    return appWith(
      dispatchByPath([
        { template: '/x/{id}', handler: parameter },
        { template: '/x/y', handler: literal },
      ]),
    );
  }

  test('an error from a route goes to the error handlers, and the next route is not tried', async () => {
    const response = await twoTemplates((_req, _res, next) => next(new Error('refused'))).get('/x/y');
    expect(response.status).toBe(400);
    expect(response.body).toEqual({ error: 'Error: refused' });
  });

  test.each([
    ['next()', undefined],
    ["next('route')", 'route'],
    ["next('router')", 'router'],
  ])('a route that passes the request on with %s lets the next template that may match answer', async (_name, signal) => {
    const response = await twoTemplates((_req, _res, next) => next(signal)).get('/x/y');
    expect(response.body).toEqual({ second: true });
  });
});
