import fs from 'node:fs';
import path from 'node:path';
import express, { type Router } from 'express';
import { projectRoot } from '../platform/paths';
import helmet from 'helmet';
import { DOCUMENT_HEADERS } from './security-headers';

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>AI Workspace Service API</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="reference"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
`;

const INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#reference',
  deepLinking: true,
  validatorUrl: null,
  tryItOutEnabled: false,
});
`;

/**
 * Serves the document (`/openapi.json`, `/openapi.yaml`, the same bundle in two encodings) and its
 * reference page (`/docs`), rendered by Swagger UI from the installed npm package: no CDN, so it
 * works with no network. The routes go on `router` itself: a nested router would be entered, and
 * searched, by every API request. The page and its assets carry the
 * security headers of a document in place of the API's.
 */
export function serveDocs(router: Router): void {
  const generated = path.join(projectRoot, 'generated');
  const json = fs.readFileSync(path.join(generated, 'openapi.json'));
  const yaml = fs.readFileSync(path.join(generated, 'openapi.yaml'));
  const assets = path.dirname(require.resolve('swagger-ui-dist/package.json'));
  router.get('/openapi.json', (_req, res) => {
    res.type('application/json').send(json);
  });
  router.get('/openapi.yaml', (_req, res) => {
    res.type('application/yaml').send(yaml);
  });
  router.use('/docs', helmet(DOCUMENT_HEADERS));
  router.get(['/docs', '/docs/'], (_req, res) => {
    res.type('html').send(PAGE);
  });
  router.get('/docs/init.js', (_req, res) => {
    res.type('application/javascript').send(INIT);
  });
  router.use('/docs/assets', express.static(assets, { index: false, maxAge: '1h' }));
}
