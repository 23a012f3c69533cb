import fs from 'node:fs';
import { BEGIN, DOC, render } from '../../scripts/config-docs';
import { type Config, ConfigError, loadConfig, topics } from '../../src/config';
import { variablesOf } from '../../src/config/declare';

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

  test('integrations: INTEGRATIONS is checked at start, PUBLIC_URL gives the redirect URI', () => {
    const github = {
      name: 'GitHub',
      authorizationUrl: 'https://github.com/login/oauth/authorize',
      tokenUrl: 'https://github.com/login/oauth/access_token',
      clientId: 'c',
      clientSecret: 's',
      scopes: ['repo'],
    };
    const google = {
      name: 'Google',
      issuer: 'https://accounts.google.com',
      clientId: 'g',
      scopes: ['openid'],
      authorizationParams: { access_type: 'offline' },
    };
    const config = loadConfig({ PORT: '9000', INTEGRATIONS: JSON.stringify({ github, google }) });
    expect(config.integrations).toEqual({
      publicUrl: 'http://localhost:9000',
      providers: [
        {
          id: 'github',
          name: 'GitHub',
          issuer: null,
          authorizationUrl: github.authorizationUrl,
          tokenUrl: github.tokenUrl,
          revocationUrl: null,
          clientId: 'c',
          clientSecret: 's',
          scopes: ['repo'],
          authorizationParams: {},
        },
        {
          id: 'google',
          name: 'Google',
          issuer: google.issuer,
          authorizationUrl: null,
          tokenUrl: null,
          revocationUrl: null,
          clientId: 'g',
          clientSecret: null,
          scopes: ['openid'],
          authorizationParams: { access_type: 'offline' },
        },
      ],
      stateTtlMs: 600_000,
      returnUrl: null,
      timeoutMs: 15_000,
    });
    expect(config.capabilities.integrations).toBe(true);
    expect(loadConfig({ PUBLIC_URL: 'https://api.example.com/' }).integrations.publicUrl).toBe('https://api.example.com');
    expect(problems({ INTEGRATIONS: 'github' })).toEqual([
      expect.stringContaining('INTEGRATIONS is not valid JSON; it must be a JSON object'),
    ]);
    // A value cut short is not quoted back: it may hold a client secret.
    const truncated = problems({ INTEGRATIONS: '{"github":{"clientSecret":"s3cr3t-value"' });
    expect(truncated).toEqual([expect.stringContaining('is not valid JSON')]);
    expect(truncated.join('\n')).not.toContain('s3cr3t');
    expect(problems({ INTEGRATIONS: '["github"]' })).toEqual([expect.stringContaining('INTEGRATIONS must be a JSON object')]);
    expect(problems({ INTEGRATIONS: JSON.stringify({ GitHub: github }) })).toEqual([expect.stringContaining('ids are 1 to 40')]);
    expect(problems({ INTEGRATIONS: JSON.stringify({ github: { ...github, clientId: undefined } }) })).toEqual([
      expect.stringContaining('"github" needs clientId'),
    ]);
    expect(problems({ INTEGRATIONS: JSON.stringify({ github: { name: 'GitHub', clientId: 'c' } }) })).toEqual([
      expect.stringContaining('needs issuer, or authorizationUrl and tokenUrl'),
    ]);
    expect(problems({ INTEGRATIONS: JSON.stringify({ github: { ...github, issuer: 'https://github.com' } }) })).toEqual([
      expect.stringContaining('not both'),
    ]);
    expect(problems({ INTEGRATIONS: JSON.stringify({ github: { ...github, scopes: 'repo' } }) })).toEqual([
      expect.stringContaining('scopes must be a list'),
    ]);
    expect(problems({ INTEGRATIONS: JSON.stringify({ github: { ...github, authorizationParams: { state: 'x' } } }) })).toEqual([
      expect.stringContaining('cannot set state'),
    ]);
    expect(problems({ INTEGRATIONS: JSON.stringify({ github: { ...github, secret: 'x' } }) })).toEqual([
      expect.stringContaining('unknown field "secret"'),
    ]);
    const production = {
      NODE_ENV: 'production',
      AUTH_JWKS_URL: 'https://idp.example.com/jwks',
      AUTH_ISSUER: 'i',
      AUTH_AUDIENCE: 'a',
      COOKIE_SECRET: 'x'.repeat(32),
      SECRETS_KEY: `k1:${KEY}`,
      MODEL_PROVIDER: 'development',
    };
    expect(problems(production)).toEqual([]);
    expect(loadConfig(production).integrations.publicUrl).toBeNull();
    expect(problems({ ...production, INTEGRATIONS: JSON.stringify({ github }) })).toEqual([
      expect.stringContaining('INTEGRATIONS needs PUBLIC_URL'),
    ]);
    expect(
      problems({
        ...production,
        INTEGRATIONS: JSON.stringify({ github: { ...github, tokenUrl: 'http://github.com/token' } }),
        PUBLIC_URL: 'https://api.example.com',
      }),
    ).toEqual([expect.stringContaining('tokenUrl must be an https URL')]);
  });

  test('the app shell: MIN_CLIENT_VERSION is a semantic version, ONBOARDING_STEPS lists distinct step ids', () => {
    expect(loadConfig({}).shell).toEqual({ minClientVersion: null, onboardingSteps: ['profile', 'model', 'first_project', 'first_file'] });
    expect(loadConfig({ MIN_CLIENT_VERSION: '2.3.0-beta.1', ONBOARDING_STEPS: 'profile, tour,first_project' }).shell).toEqual({
      minClientVersion: '2.3.0-beta.1',
      onboardingSteps: ['profile', 'tour', 'first_project'],
    });
    expect(problems({ MIN_CLIENT_VERSION: '2.3' })).toEqual([expect.stringContaining('MIN_CLIENT_VERSION')]);
    expect(problems({ ONBOARDING_STEPS: 'profile,Tour!' })).toEqual([expect.stringContaining('ONBOARDING_STEPS')]);
    expect(problems({ ONBOARDING_STEPS: 'profile,profile' })).toEqual([expect.stringContaining('twice')]);
  });

  test('the HTTP edge: deliberate defaults, and a request timeout shorter than the headers timeout is refused', () => {
    const config = loadConfig({});
    expect(config.http).toEqual({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 0,
      keepAliveTimeoutMs: 5_000,
      bodyTimeoutMs: 20_000,
      bodyMinBytesPerSecond: 1_024,
      maxConnections: 10_000,
    });
    expect(config).toMatchObject({ shutdownDrainMs: 5_000, authFailuresPerMinute: 30 });
    expect(problems({ HTTP_REQUEST_TIMEOUT_MS: '5000' })).toEqual([expect.stringContaining('HTTP_REQUEST_TIMEOUT_MS')]);
    expect(problems({ HTTP_REQUEST_TIMEOUT_MS: '60000' })).toEqual([]);
  });

  test('production refuses to start without an identity provider, a cookie secret, SECRETS_KEY and a model provider', () => {
    const found = problems({ NODE_ENV: 'production' });
    expect(found).toEqual([
      expect.stringContaining('SECRETS_KEY'),
      expect.stringContaining('MODEL_PROVIDER=development'),
      expect.stringContaining('identity provider'),
      expect.stringContaining('COOKIE_SECRET'),
    ]);
    const production = {
      NODE_ENV: 'production',
      AUTH_JWKS_URL: 'https://idp.example.com/.well-known/jwks.json',
      AUTH_ISSUER: 'https://idp.example.com/',
      AUTH_AUDIENCE: 'ai-workspace',
      COOKIE_SECRET: 'x'.repeat(32),
      SECRETS_KEY: `k1:${KEY}`,
    };
    expect(problems(production)).toEqual([expect.stringMatching(/^production needs a model provider: set MODEL_PROVIDER_BASE_URL/)]);
    expect(problems({ ...production, MODEL_PROVIDER_BASE_URL: 'http://ollama:11434/v1' })).toEqual([]);
    // The development model only when asked for by name.
    expect(problems({ ...production, MODEL_PROVIDER: 'development' })).toEqual([]);
    expect(loadConfig({ ...production, MODEL_PROVIDER: 'development' }).models).toMatchObject({ provider: 'development', baseUrl: null });
    expect(problems({ ...production, MODEL_PROVIDER: 'development', MODEL_PROVIDER_BASE_URL: 'http://ollama:11434/v1' })).toEqual([
      expect.stringContaining('cannot be combined'),
    ]);
    expect(problems({ MODEL_PROVIDER: 'openai-compatible' })).toEqual([expect.stringContaining('needs MODEL_PROVIDER_BASE_URL')]);
    expect(loadConfig({}).models.provider).toBe('development');
    expect(problems({ AUTH_JWKS_URL: 'https://idp.example.com/jwks' })).toEqual([expect.stringContaining('AUTH_ISSUER')]);
  });

  test('model ids may contain ":" and "/"; prices are the last two parts only when both are whole numbers', () => {
    const models = (list: string) =>
      loadConfig({ MODEL_PROVIDER_BASE_URL: 'http://vllm:8000/v1', MODEL_PROVIDER_MODELS: list }).models.models;
    expect(models('gpt-4o-mini:15:60,llama3.1:8b,qwen2.5:7b-instruct,meta-llama/Llama-3.1-8B-Instruct,model:1:2:0:0,a:b:3')).toEqual([
      { id: 'gpt-4o-mini', inputCentsPerMillionTokens: 15, outputCentsPerMillionTokens: 60 },
      { id: 'llama3.1:8b', inputCentsPerMillionTokens: 0, outputCentsPerMillionTokens: 0 },
      { id: 'qwen2.5:7b-instruct', inputCentsPerMillionTokens: 0, outputCentsPerMillionTokens: 0 },
      { id: 'meta-llama/Llama-3.1-8B-Instruct', inputCentsPerMillionTokens: 0, outputCentsPerMillionTokens: 0 },
      { id: 'model:1:2', inputCentsPerMillionTokens: 0, outputCentsPerMillionTokens: 0 },
      { id: 'a:b:3', inputCentsPerMillionTokens: 0, outputCentsPerMillionTokens: 0 },
    ]);
    expect(problems({ MODEL_PROVIDER_BASE_URL: 'http://vllm:8000/v1', MODEL_PROVIDER_MODELS: ':15:60' })).toEqual([
      expect.stringContaining('MODEL_PROVIDER_MODELS'),
    ]);
    expect(problems({ MODEL_PROVIDER_BASE_URL: 'http://vllm:8000/v1', MODEL_PROVIDER_MODELS: 'x'.repeat(201) })).toEqual([
      expect.stringContaining('MODEL_PROVIDER_MODELS'),
    ]);
    // A base URL alone is allowed: the provider's list is read at start.
    expect(problems({ MODEL_PROVIDER_BASE_URL: 'http://ollama:11434/v1' })).toEqual([]);
  });

  test('media models: ids with an optional price in cents per unit; they need a base URL; the media limits', () => {
    const base = { MODEL_PROVIDER_BASE_URL: 'http://vllm:8000/v1' };
    const media = loadConfig({
      ...base,
      MODEL_PROVIDER_IMAGE_MODELS: 'gpt-image-1=4,dall-e-2',
      MODEL_PROVIDER_TRANSCRIPTION_MODELS: 'whisper-1=0.01',
      MODEL_PROVIDER_SPEECH_MODELS: 'tts-1=0.0015',
    }).models.media;
    expect(media).toEqual({
      image: [
        { id: 'gpt-image-1', microCentsPerUnit: 4_000_000 },
        { id: 'dall-e-2', microCentsPerUnit: 0 },
      ],
      transcription: [{ id: 'whisper-1', microCentsPerUnit: 10_000 }],
      speech: [{ id: 'tts-1', microCentsPerUnit: 1_500 }],
    });
    for (const entry of ['dall-e-3=', '=4', 'x=1.1234567', 'x=cheap']) {
      expect(problems({ ...base, MODEL_PROVIDER_IMAGE_MODELS: entry })).toEqual([expect.stringContaining('MODEL_PROVIDER_IMAGE_MODELS')]);
    }
    expect(problems({ MODEL_PROVIDER_SPEECH_MODELS: 'tts-1' })).toEqual([
      expect.stringContaining('MODEL_PROVIDER_SPEECH_MODELS needs MODEL_PROVIDER_BASE_URL'),
    ]);
    expect(loadConfig({}).media).toEqual({ timeoutMs: 120_000, maxAudioBytes: 25 * 1024 * 1024, maxImageBytes: 20 * 1024 * 1024 });
    expect(problems({ MEDIA_TIMEOUT_MS: '50' })).toEqual([expect.stringContaining('MEDIA_TIMEOUT_MS')]);
  });

  test('embeddings: the size is optional (learned) or a whole number; the indexer backoff has a cap', () => {
    expect(loadConfig({}).embeddings).toMatchObject({ dimensions: null, queryTimeoutMs: 5000, indexMaxBackoffMs: 300_000 });
    expect(loadConfig({ EMBEDDINGS_DIMENSIONS: '768' }).embeddings.dimensions).toBe(768);
    expect(problems({ EMBEDDINGS_DIMENSIONS: 'big' })).toEqual([expect.stringContaining('EMBEDDINGS_DIMENSIONS')]);
    expect(problems({ KNOWLEDGE_INDEX_MAX_BACKOFF_MS: '5' })).toEqual([expect.stringContaining('KNOWLEDGE_INDEX_MAX_BACKOFF_MS')]);
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
    expect(problems({ NODE_ENV: 'production', WEBHOOK_SECRETS_KEY: 'w'.repeat(32) })).not.toContainEqual(
      expect.stringContaining('SECRETS_KEY'),
    );
  });

  test('the outbound guard settings, with the webhook names as deprecated aliases', () => {
    expect(loadConfig({}).outbound).toEqual({ allowLoopback: false, allowedPorts: [] });
    expect(loadConfig({ OUTBOUND_ALLOW_LOOPBACK: 'true', OUTBOUND_ALLOWED_PORTS: '8443, 11434' }).outbound).toEqual({
      allowLoopback: true,
      allowedPorts: [8443, 11434],
    });
    expect(loadConfig({ WEBHOOK_ALLOW_LOOPBACK: 'true', WEBHOOK_ALLOWED_PORTS: '8443' }).outbound).toEqual({
      allowLoopback: true,
      allowedPorts: [8443],
    });
    expect(problems({ OUTBOUND_ALLOW_LOOPBACK: 'true', WEBHOOK_ALLOW_LOOPBACK: 'false' })).toEqual([
      expect.stringContaining('set OUTBOUND_ALLOW_LOOPBACK only'),
    ]);
    expect(problems({ WEBHOOK_ALLOWED_PORTS: 'http' })).toEqual([expect.stringContaining('WEBHOOK_ALLOWED_PORTS must list port numbers')]);
    const production = {
      NODE_ENV: 'production',
      SECRETS_KEY: `k1:${KEY}`,
      COOKIE_SECRET: 'x'.repeat(32),
      AUTH_PUBLIC_KEY: 'x',
      AUTH_ISSUER: 'i',
      AUTH_AUDIENCE: 'a',
      MODEL_PROVIDER: 'development',
    };
    expect(problems({ ...production, OUTBOUND_ALLOW_LOOPBACK: 'true' })).toEqual([expect.stringContaining('cannot be set in production')]);
    expect(problems({ ...production, WEBHOOK_ALLOW_LOOPBACK: 'true' })).toEqual([
      expect.stringContaining('WEBHOOK_ALLOW_LOOPBACK is for tests'),
    ]);
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

describe('the declarations', () => {
  const variables = topics.flatMap((topic) => variablesOf(topic.tree));

  test('each variable, and each deprecated alias, is declared once; each rule relates declared variables', () => {
    const names = variables.flatMap((v) => [v.name, ...(v.spec.alias === undefined ? [] : [v.spec.alias])]);
    expect(names.filter((name, i) => names.indexOf(name) !== i)).toEqual([]);
    const keys = topics.flatMap((topic) => Object.keys(topic.tree));
    expect(keys.filter((key, i) => keys.indexOf(key) !== i)).toEqual([]);
    const rules = topics.flatMap((topic) => Object.entries(topic.rules));
    expect(rules.length).toBeGreaterThan(10);
    for (const [name, rule] of rules) {
      expect(name).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
      expect(rule.variables.filter((v) => !names.includes(v))).toEqual([]);
    }
  });

  test("every default is one of its variable's values, and each variable is documented with its type and meaning", () => {
    // Unset, every variable takes its default (S3's only with a bucket): a default it does not accept throws.
    const config: Config = loadConfig({ S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'a', S3_SECRET_ACCESS_KEY: 's' });
    expect(config.storage.s3).toEqual({
      endpoint: null,
      bucket: 'b',
      region: 'us-east-1',
      accessKeyId: 'a',
      secretAccessKey: 's',
      forcePathStyle: false,
    });
    expect(loadConfig({ S3_BUCKET: 'b', S3_ENDPOINT: 'http://minio:9000' }).storage.s3?.forcePathStyle).toBe(true);
    for (const v of variables) {
      expect([v.name, v.spec.doc.length > 0, v.accepts.length > 0]).toEqual([v.name, true, true]);
    }
  });

  test('docs/configuration.md is what the declarations generate (make config-docs)', () => {
    const documented = fs.readFileSync(DOC, 'utf8');
    expect(render(documented)).toBe(documented);
    for (const v of variables) expect(documented).toContain(`| \`${v.name}\``);
    // A row lost, or a default changed by hand, is written back.
    const [before, tables] = documented.split(BEGIN) as [string, string];
    const edited = before + BEGIN + tables.replace(/^\| `PORT` \| `8080` .*\n/m, '').replace('| `HOST` | `0.0.0.0`', '| `HOST` | `::`');
    expect(edited).not.toBe(documented);
    expect(render(edited)).toBe(documented);
  });

  test('a broken rule is reported by name; a rule relating a variable at fault waits for it', () => {
    expect(problems({ HTTP_REQUEST_TIMEOUT_MS: '5000' })).toEqual([
      'HTTP_REQUEST_TIMEOUT_MS must be 0 or at least HTTP_HEADERS_TIMEOUT_MS [rule request-timeout-covers-headers]',
    ]);
    expect(problems({ HTTP_REQUEST_TIMEOUT_MS: '5000', HTTP_HEADERS_TIMEOUT_MS: 'soon' })).toEqual([
      'HTTP_HEADERS_TIMEOUT_MS must be a whole number from 1000 to 600000 (got "soon")',
    ]);
    const production = {
      NODE_ENV: 'production',
      AUTH_JWKS_URL: 'https://idp.example.com/jwks',
      AUTH_ISSUER: 'i',
      AUTH_AUDIENCE: 'a',
      SECRETS_KEY: `k1:${KEY}`,
      MODEL_PROVIDER: 'development',
    };
    // A cookie secret that is too short is not also reported missing.
    expect(problems({ ...production, COOKIE_SECRET: 'short' })).toEqual(['COOKIE_SECRET must be at least 32 characters']);
    expect(problems(production)).toEqual([
      'production needs COOKIE_SECRET (at least 32 characters) [rule production-needs-a-cookie-secret]',
    ]);
  });

  test('production takes https URLs only (a rule); blank is unset', () => {
    const production = {
      NODE_ENV: 'production',
      AUTH_JWKS_URL: 'https://idp.example.com/jwks',
      AUTH_ISSUER: 'i',
      AUTH_AUDIENCE: 'a',
      COOKIE_SECRET: 'x'.repeat(32),
      SECRETS_KEY: `k1:${KEY}`,
      MODEL_PROVIDER: 'development',
    };
    expect(
      problems({ ...production, PUBLIC_URL: 'http://api.example.com', INTEGRATIONS_RETURN_URL: 'http://app.example.com/done' }),
    ).toEqual([
      'PUBLIC_URL must be an https URL in production [rule production-urls-are-https]',
      'INTEGRATIONS_RETURN_URL must be an https URL in production [rule production-urls-are-https]',
    ]);
    expect(loadConfig({ PUBLIC_URL: 'http://api.example.com' }).integrations.publicUrl).toBe('http://api.example.com');
    expect(loadConfig({ PORT: '  ', NODE_ENV: '' })).toMatchObject({ port: 8080, env: 'development' });
    expect(problems({ PUBLIC_URL: 'https://api.example.com/?x=1' })).toEqual([expect.stringContaining('PUBLIC_URL must be a base URL')]);
  });
});
