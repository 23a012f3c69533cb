import { ConfigError, loadConfig } from '../../src/config';

const KEY = Buffer.alloc(32, 7).toString('base64');

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('configuration', () => {
  test('embedded defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({ env: 'development', port: 8080, databaseUrl: null, bodyLimitBytes: 1024 * 1024 });
    expect(config.dataDir).toMatch(/\.data$/);
    expect(config.capabilities).toMatchObject({ automations: true, billing: false, vectorSearch: true, billingProvider: 'stripe' });
  });

  test('bad values are reported by name', () => {
    expect(problems({ PORT: 'eighty' })).toEqual([expect.stringContaining('PORT')]);
    expect(problems({ DATABASE_URL: 'mysql://x' })).toEqual([expect.stringContaining('DATABASE_URL')]);
    expect(problems({ CAPABILITY_AUTOMATIONS: 'maybe' })).toEqual([expect.stringContaining('CAPABILITY_AUTOMATIONS')]);
    expect(problems({ BODY_LIMIT: 'huge' })).toEqual([expect.stringContaining('BODY_LIMIT')]);
    expect(problems({ AUTH_ALGORITHMS: 'HS256' })).toEqual([expect.stringContaining('asymmetric')]);
    expect(problems({ ALLOWED_ORIGINS: 'https://a.example.com/path' })).toEqual([expect.stringContaining('ALLOWED_ORIGINS')]);
    expect(problems({ BILLING_PROVIDER: 'paypal' })).toEqual([expect.stringContaining('BILLING_PROVIDER')]);
  });

  test('production refuses to start without an identity provider, a cookie secret and SECRETS_KEY', () => {
    const found = problems({ NODE_ENV: 'production' });
    expect(found).toEqual([expect.stringContaining('SECRETS_KEY'), expect.stringContaining('identity provider'), expect.stringContaining('COOKIE_SECRET')]);
    expect(
      problems({
        NODE_ENV: 'production',
        AUTH_JWKS_URL: 'https://idp.example.com/.well-known/jwks.json',
        AUTH_ISSUER: 'https://idp.example.com/',
        AUTH_AUDIENCE: 'ai-workspace',
        COOKIE_SECRET: 'x'.repeat(32),
        SECRETS_KEY: `k1:${KEY}`,
      }),
    ).toEqual([]);
    expect(problems({ AUTH_JWKS_URL: 'https://idp.example.com/jwks' })).toEqual([expect.stringContaining('AUTH_ISSUER')]);
  });

  test('SECRETS_KEY lists <key id>:<base64 of 32 bytes>; problems never show a key', () => {
    const other = Buffer.alloc(32, 9).toString('base64url');
    const config = loadConfig({ SECRETS_KEY: `k2:${other}, k1:${KEY}` });
    expect(config.secrets.keys.map((k) => k.id)).toEqual(['k2', 'k1']);
    expect(config.secrets.keys[0]?.key).toEqual(Buffer.alloc(32, 9));
    const short = Buffer.alloc(16, 1).toString('base64');
    for (const value of [short, `k1:${short}`, `bad id:${KEY}`, `k1:${KEY},k1:${KEY}`, `legacy:${KEY}`, ',']) {
      const found = problems({ SECRETS_KEY: value });
      expect(found).toEqual([expect.stringContaining('SECRETS_KEY')]);
      expect(found.join(' ')).not.toContain(short);
      expect(found.join(' ')).not.toContain(KEY);
    }
    // The deprecated key material stands in for SECRETS_KEY in production.
    expect(problems({ WEBHOOK_SECRETS_KEY: 'short' })).toEqual([expect.stringContaining('WEBHOOK_SECRETS_KEY')]);
    expect(problems({ NODE_ENV: 'production', WEBHOOK_SECRETS_KEY: 'w'.repeat(32) })).not.toContainEqual(expect.stringContaining('SECRETS_KEY'));
  });

  test('the outbound guard settings, with the webhook names as deprecated aliases', () => {
    expect(loadConfig({}).outbound).toEqual({ allowLoopback: false, allowedPorts: [] });
    expect(loadConfig({ OUTBOUND_ALLOW_LOOPBACK: 'true', OUTBOUND_ALLOWED_PORTS: '8443, 11434' }).outbound).toEqual({ allowLoopback: true, allowedPorts: [8443, 11434] });
    expect(loadConfig({ WEBHOOK_ALLOW_LOOPBACK: 'true', WEBHOOK_ALLOWED_PORTS: '8443' }).outbound).toEqual({ allowLoopback: true, allowedPorts: [8443] });
    expect(problems({ OUTBOUND_ALLOW_LOOPBACK: 'true', WEBHOOK_ALLOW_LOOPBACK: 'false' })).toEqual([expect.stringContaining('set OUTBOUND_ALLOW_LOOPBACK only')]);
    expect(problems({ WEBHOOK_ALLOWED_PORTS: 'http' })).toEqual([expect.stringContaining('WEBHOOK_ALLOWED_PORTS must list port numbers')]);
    const production = { NODE_ENV: 'production', SECRETS_KEY: `k1:${KEY}`, COOKIE_SECRET: 'x'.repeat(32), AUTH_PUBLIC_KEY: 'x', AUTH_ISSUER: 'i', AUTH_AUDIENCE: 'a' };
    expect(problems({ ...production, OUTBOUND_ALLOW_LOOPBACK: 'true' })).toEqual([expect.stringContaining('cannot be set in production')]);
    expect(problems({ ...production, WEBHOOK_ALLOW_LOOPBACK: 'true' })).toEqual([expect.stringContaining('WEBHOOK_ALLOW_LOOPBACK is for tests')]);
  });
});
