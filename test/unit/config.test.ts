import { ConfigError, loadConfig } from '../../src/config';

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

  test('production refuses to start without an identity provider and a cookie secret', () => {
    const found = problems({ NODE_ENV: 'production' });
    expect(found).toEqual([expect.stringContaining('identity provider'), expect.stringContaining('COOKIE_SECRET')]);
    expect(
      problems({
        NODE_ENV: 'production',
        AUTH_JWKS_URL: 'https://idp.example.com/.well-known/jwks.json',
        AUTH_ISSUER: 'https://idp.example.com/',
        AUTH_AUDIENCE: 'ai-workspace',
        COOKIE_SECRET: 'x'.repeat(32),
      }),
    ).toEqual([]);
    expect(problems({ AUTH_JWKS_URL: 'https://idp.example.com/jwks' })).toEqual([expect.stringContaining('AUTH_ISSUER')]);
  });
});

describe('configuration of recovery after a crash', () => {
  test('defaults, and bad values reported by name', () => {
    const config = loadConfig({});
    expect(config.storage).toMatchObject({ incomingMaxAgeMs: 24 * 3_600_000, incomingSweepIntervalMs: 3_600_000 });
    expect(config.models).toMatchObject({ replyLeaseMs: 30_000, replyRecoveryIntervalMs: 10_000 });
    expect(loadConfig({ INCOMING_UPLOAD_MAX_AGE: '2d', CHAT_REPLY_LEASE_MS: '5000' })).toMatchObject({
      storage: { incomingMaxAgeMs: 2 * 86_400_000 },
      models: { replyLeaseMs: 5000 },
    });
    expect(problems({ INCOMING_UPLOAD_MAX_AGE: 'a day' })).toEqual([expect.stringContaining('INCOMING_UPLOAD_MAX_AGE')]);
    expect(problems({ INCOMING_UPLOAD_MAX_AGE: '30s' })).toEqual([expect.stringContaining('INCOMING_UPLOAD_MAX_AGE must be at least 1m')]);
    expect(problems({ INCOMING_UPLOAD_SWEEP_INTERVAL: '30d' })).toEqual([expect.stringContaining('INCOMING_UPLOAD_SWEEP_INTERVAL')]);
    expect(problems({ CHAT_REPLY_LEASE_MS: '100' })).toEqual([expect.stringContaining('CHAT_REPLY_LEASE_MS')]);
    expect(problems({ CHAT_REPLY_RECOVERY_INTERVAL_MS: 'often' })).toEqual([expect.stringContaining('CHAT_REPLY_RECOVERY_INTERVAL_MS')]);
  });
});
