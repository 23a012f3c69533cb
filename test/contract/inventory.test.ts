import type { Router } from 'express';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { loadApiDocument, METHODS, toExpressPath } from '../../src/http/openapi';
import { type Harness, startHarness } from '../helpers/harness';

let h: Harness;
const doc = loadApiDocument();

beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.close());

type Layer = {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: Router & { stack?: Layer[]; handlers?: Array<{ stack: Layer[] }> };
};

/**
 * Every (method, path) Express actually serves, read from the app's router stack (and from the
 * routers the API's path dispatch holds).
 */
function servedRoutes(stack: Layer[]): string[] {
  const out: string[] = [];
  for (const layer of stack) {
    if (layer.route) {
      for (const [method, on] of Object.entries(layer.route.methods)) {
        if (on && method !== '_all') out.push(`${method.toUpperCase()} ${layer.route.path}`);
      }
    } else if (layer.handle?.stack) {
      out.push(...servedRoutes(layer.handle.stack));
    } else if (layer.handle?.handlers) {
      for (const router of layer.handle.handlers) out.push(...servedRoutes(router.stack));
    }
  }
  return out;
}

function documentedOperations(): Array<{ key: string; path: string; method: string; op: OpenAPIV3.OperationObject }> {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = (item as Record<string, OpenAPIV3.OperationObject | undefined>)[method];
      if (op) out.push({ key: `${method.toUpperCase()} ${toExpressPath(path)}`, path, method, op });
    }
  }
  return out;
}

const REFERENCE_TAGS = [
  'Administration',
  'Agent environments',
  'Automations',
  'Billing',
  'Bootstrap',
  'Chat',
  'Conversations',
  'Discovery',
  'Files',
  'Integrations',
  'Knowledge',
  'MCP Servers',
  'Media',
  'Memory',
  'Model Providers',
  'Models',
  'Notes',
  'Onboarding',
  'Outputs',
  'Projects',
  'Settings',
  'Skills',
  'Tools',
  'Webhooks',
];
/** Tags this service adds to the reference's (additive: DESIGN sections 15, 20 and 21). */
const ADDED_TAGS = ['Access tokens', 'Approvals', 'MCP server', 'OpenAI compatible', 'Sharing'];
const TAGS = [...REFERENCE_TAGS, ...ADDED_TAGS];

describe('inventory', () => {
  test('the routes Express serves under /api/v1 and /v1 are exactly the document’s operations', () => {
    const router = (h.runtime.app as unknown as { router: { stack: Layer[] } }).router;
    const api = (route: string) => /^\/(api\/)?v1\//.test(route.split(' ')[1]!);
    const served = servedRoutes(router.stack).filter(api).sort();
    const documented = documentedOperations()
      .map((o) => o.key)
      .filter(api)
      .sort();
    expect(served).toEqual(documented);
    expect(documented.length).toBeGreaterThanOrEqual(17);
    expect(documented).toEqual(expect.arrayContaining(['GET /v1/models', 'POST /v1/chat/completions', 'POST /v1/embeddings']));
  });

  test('the OpenAI-compatible operations are exactly those under /v1, bearer tokens only, and every error of theirs is OpenAI’s shape', () => {
    for (const { key, path, op } of documentedOperations()) {
      const openAi = op.tags?.[0] === 'OpenAI compatible';
      expect({ key, openAi }).toEqual({ key, openAi: path.startsWith('/v1/') });
      if (!openAi) continue;
      expect({ key, security: op.security }).toEqual({ key, security: [{ bearerAuth: [] }] });
      expect(op).toMatchObject({ 'x-capability': 'openaiApi', 'x-scope': 'chat' });
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        if (status.startsWith('2')) continue;
        const ref = (response as { $ref?: string }).$ref ?? '';
        const resolved = doc.components!.responses![ref.split('/').pop()!] as OpenAPIV3.ResponseObject;
        const schema = resolved.content?.['application/json']?.schema as { $ref?: string };
        expect({ key, status, schema: schema.$ref }).toEqual({ key, status, schema: '#/components/schemas/OpenAIErrorResponse' });
      }
    }
  });

  test('the web-app session routes and the OAuth callback are served too', () => {
    const router = (h.runtime.app as unknown as { router: { stack: Layer[] } }).router;
    expect(servedRoutes(router.stack)).toEqual(
      expect.arrayContaining(['POST /auth/session', 'DELETE /auth/session', 'GET /integrations/callback']),
    );
  });
});

describe('the document', () => {
  test('has the reference’s 24 tags (and the added ones), each described, and the two security schemes', () => {
    expect(doc.tags?.map((t) => t.name).sort()).toEqual([...TAGS].sort());
    for (const tag of doc.tags ?? []) expect(tag.description?.length).toBeGreaterThan(10);
    expect(doc.components?.securitySchemes).toMatchObject({
      browserSession: { type: 'apiKey', in: 'cookie', name: 'service_session' },
      bearerAuth: { type: 'http', scheme: 'bearer' },
    });
    expect(doc.servers?.[0]?.url).toBe('{base_url}');
  });

  test('every operation is named, tagged, described, and every response has a schema', () => {
    const ids = new Set<string>();
    for (const { key, op } of documentedOperations()) {
      expect(op.operationId).toBeTruthy();
      expect(ids.has(op.operationId!)).toBe(false);
      ids.add(op.operationId!);
      expect(op.tags).toHaveLength(1);
      expect(TAGS).toContain(op.tags![0]);
      expect(op.summary).toBeTruthy();
      expect(op.description?.length).toBeGreaterThan(40);
      // An operation open to anyone (`security: []`, discovery) cannot answer 401.
      const open = Array.isArray(op.security) && op.security.length === 0;
      expect(Object.keys(op.responses ?? {})).toEqual(expect.arrayContaining(open ? ['200', '500'] : ['200', '401', '500']));
      if (open) expect(Object.keys(op.responses ?? {})).not.toContain('401');
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        const resolved =
          '$ref' in response
            ? (doc.components!.responses![(response.$ref as string).split('/').pop()!] as OpenAPIV3.ResponseObject)
            : response;
        const media = Object.entries(resolved.content ?? {});
        // Only "not modified", "no content" and "accepted" (an MCP notification, /mcp) have no body.
        expect({ key, status, contentTypes: media.length > 0 }).toEqual({
          key,
          status,
          contentTypes: !['304', '204', '202'].includes(status),
        });
        for (const [type, content] of media) {
          expect({ key, status, type, schema: Boolean(content.schema) }).toEqual({ key, status, type, schema: true });
          expect({ key, status, type, example: Boolean(content.example ?? content.examples) }).toEqual({
            key,
            status,
            type,
            example: true,
          });
        }
      }
    }
  });
});
