import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { type Harness, startHarness } from '../helpers/harness';

/** Values a stranger must never see; each is configured below. */
const SECRETS = {
  origin: 'https://app.private-origin.example',
  providerUrl: 'http://127.0.0.1:9/v1',
  providerKey: 'sk-provider-key-do-not-leak',
  model: 'private-model:70b',
  admin: 'discovery-admin-id',
  cookie: 'cookie-secret-'.padEnd(40, 'c'),
  secretsKey: Buffer.alloc(32, 9).toString('base64'),
  metricsToken: 'metrics-token-do-not-leak',
};
const ISSUER = 'https://login.example.com/realms/workspace/';

let h: Harness;

beforeAll(async () => {
  const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
  const sign = (userId: string) =>
    new SignJWT({})
      .setProtectedHeader({ alg: 'RS256' })
      .setSubject(userId)
      .setIssuer(ISSUER)
      .setAudience('ai-workspace')
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(privateKey);
  h = await startHarness(
    {
      NODE_ENV: 'production',
      AUTH_PUBLIC_KEY: await exportSPKI(publicKey),
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: 'ai-workspace',
      AUTH_ALGORITHMS: 'RS256',
      COOKIE_SECRET: SECRETS.cookie,
      SECRETS_KEY: `k1:${SECRETS.secretsKey}`,
      ALLOWED_ORIGINS: SECRETS.origin,
      MODEL_PROVIDER_BASE_URL: SECRETS.providerUrl,
      MODEL_PROVIDER_API_KEY: SECRETS.providerKey,
      MODEL_PROVIDER_MODELS: SECRETS.model,
      BOOTSTRAP_ADMIN_USER_IDS: SECRETS.admin,
      METRICS_TOKEN: SECRETS.metricsToken,
      MIN_CLIENT_VERSION: '2.3.0',
    },
    { sign },
  );
});
afterAll(() => h.close());

describe('discovery', () => {
  test('answers without credentials, cacheable, with versions, schemes, the OIDC issuer and the capabilities', async () => {
    const res = await h.http().get('/api/v1/discovery');
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=60');
    expect(res.body).toEqual({
      discovery: {
        apiVersion: '1.0.0',
        supportedVersions: [{ version: 'v1', basePath: '/api/v1', documentVersion: '1.0.0', status: 'current' }],
        minClientVersion: '2.3.0',
        authentication: {
          schemes: [
            { name: 'bearerAuth', type: 'bearer', description: expect.any(String) },
            {
              name: 'browserSession',
              type: 'cookie',
              description: expect.any(String),
              cookieName: 'service_session',
              sessionPath: '/auth/session',
            },
          ],
          oidc: { issuer: ISSUER, metadataUrl: 'https://login.example.com/realms/workspace/.well-known/openid-configuration' },
        },
        capabilities: {
          automations: true,
          billing: false,
          vectorSearch: expect.any(Boolean),
          byok: true,
          mcp: true,
          integrations: true,
          openaiApi: true,
          mcpServer: true,
          billingProvider: 'none',
        },
        links: { openapi: '/openapi.json', openapiYaml: '/openapi.yaml', docs: '/docs', openaiApi: '/v1', mcpServer: '/mcp' },
      },
    });
    // The links lead somewhere.
    expect((await h.http().get('/openapi.json')).status).toBe(200);
    expect((await h.http().get('/docs/')).status).toBeLessThan(400);
  });

  test('links the OpenAI-compatible API and the MCP server only while their capabilities are on', async () => {
    const admin = { userId: 'test-admin', requestId: null };
    await h.runtime.services.capabilities.update(admin, { openaiApi: false, mcpServer: false });
    try {
      const res = await h.http().get('/api/v1/discovery').expect(200);
      expect(res.body.discovery.links).toEqual({ openapi: '/openapi.json', openapiYaml: '/openapi.yaml', docs: '/docs' });
    } finally {
      await h.runtime.services.capabilities.update(admin, { openaiApi: true, mcpServer: true });
    }
  });

  test('leaks nothing a stranger should not see', async () => {
    const anonymous = await h.http().get('/api/v1/discovery');
    const signedIn = await h
      .http()
      .get('/api/v1/discovery')
      .set((await h.newUser('visitor')).auth);
    for (const res of [anonymous, signedIn]) {
      const seen = JSON.stringify(res.headers) + res.text;
      for (const [name, value] of Object.entries(SECRETS)) expect({ name, leaked: seen.includes(value) }).toEqual({ name, leaked: false });
      expect(seen).not.toContain('127.0.0.1');
      expect(seen).not.toMatch(/user|admin/i);
    }
    // Everyone gets the same answer.
    expect(signedIn.text).toBe(anonymous.text);
  });

  test('credentials are not read: a refused token still gets the answer', async () => {
    const res = await h.http().get('/api/v1/discovery').set('Authorization', 'Bearer not-a-token').set('Cookie', 'service_session=forged');
    expect(res.status).toBe(200);
    expect(res.headers['www-authenticate']).toBeUndefined();
  });

  test('bad input is 400', async () => {
    const res = await h.http().get('/api/v1/discovery').query({ verbose: 'true' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect((await h.http().post('/api/v1/discovery').send({})).status).toBe(405);
  });
});
