import path from 'node:path';
import cron from 'node-cron';
import type { Entitlements, Plan } from './areas/billing/service';
import type { IntegrationProvider } from './areas/integrations/service';
import { DEFAULT_ONBOARDING_STEPS } from './areas/onboarding/service';
import type { HttpLimits } from './http/server';
import type { MediaModelPrice } from './platform/ai/media';
import { parseSecretKeys, type SecretKey } from './platform/secrets';

/** Configuration of the service, read from the environment once at start-up and validated. */
export interface Config {
  env: 'development' | 'production' | 'test';
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | null;
  databasePoolSize: number;
  logLevel: 'error' | 'warn' | 'info' | 'debug' | 'silent';
  bodyLimitBytes: number;
  trustProxy: boolean;
  validateResponses: boolean;
  shutdownTimeoutMs: number;
  /** How long a stopping instance keeps serving (with /readyz 503) before it stops accepting connections. */
  shutdownDrainMs: number;
  /** The HTTP server's limits on slow and idle clients (src/http/server.ts). */
  http: HttpLimits;
  /** Failed authentications per client address and minute before `429`, across instances; 0 turns the limit off. */
  authFailuresPerMinute: number;
  auth: {
    jwksUrl: string | null;
    publicKeyPem: string | null;
    issuer: string | null;
    audience: string | null;
    algorithms: string[];
    cookieSecret: string | null;
    sessionIdleMs: number;
    sessionAbsoluteMs: number;
    allowedOrigins: string[];
  };
  capabilities: {
    automations: boolean;
    billing: boolean;
    vectorSearch: boolean;
    /** Users may connect their own model providers (bring your own key). */
    byok: boolean;
    /** Users may connect MCP servers, and models may call their tools. */
    mcp: boolean;
    /** Users may connect integrations (OAuth), and MCP servers may sign in with them. */
    integrations: boolean;
    /** The payment provider while billing is on (the capability reports `none` while it is off). */
    billingProvider: 'stripe';
    cacheMs: number;
  };
  billing: {
    /** ISO 4217 code, lower case, of every amount. */
    currency: string;
    /** What users without a paid plan (and every user while billing is off) are entitled to; null is unlimited. */
    defaultEntitlements: Entitlements;
    /** The paid plans, each matched by the provider's price ids. */
    plans: Plan[];
    stripe: {
      /** The endpoint's signing secret (`whsec_…`); the inbound route is served only with one. */
      webhookSecret: string | null;
      /** How old a signed event may be. */
      toleranceSeconds: number;
    };
  };
  /** Requests per user and minute, across instances; 0 turns the limit off. */
  rateLimitPerMinute: number;
  bootstrapAdminUserIds: string[];
  /** Bearer token that `GET /metrics` requires; unset, the route is not served. */
  metricsToken: string | null;
  storage: {
    /** S3-compatible store when a bucket is set; otherwise the local directory DATA_DIR/objects. */
    s3: {
      endpoint: string | null;
      bucket: string;
      region: string;
      accessKeyId: string | null;
      secretAccessKey: string | null;
      forcePathStyle: boolean;
    } | null;
    maxUploadBytes: number;
    maxOutputBytes: number;
    /** Partial objects of uploads that never ended are removed once this old. */
    incomingMaxAgeMs: number;
    /** How often each instance removes them (and once at start). */
    incomingSweepIntervalMs: number;
  };
  /** Lifetime of the upload URLs and content URLs the service signs. */
  signedUrlTtlSeconds: number;
  ingestMaxBytes: number;
  embeddings: {
    provider: 'builtin-hashing' | 'http';
    baseUrl: string | null;
    apiKey: string | null;
    model: string;
    /**
     * The vector size asked for and checked (EMBEDDINGS_DIMENSIONS); null: learned from the
     * provider's first answer (the built-in hashing embedder uses 256).
     */
    dimensions: number | null;
    /** How long a search waits for its query's embedding before answering from full-text retrieval alone. */
    queryTimeoutMs: number;
    /** How often new or changed records are embedded. */
    indexIntervalMs: number;
    /** The longest wait between indexing attempts while embeddings fail (exponential backoff). */
    indexMaxBackoffMs: number;
  };
  models: {
    /**
     * `openai-compatible` with MODEL_PROVIDER_BASE_URL; `development`, the built-in deterministic
     * model, only without one (production must choose it explicitly with MODEL_PROVIDER=development).
     */
    provider: 'openai-compatible' | 'development';
    /** An OpenAI-compatible API; null for the built-in development provider. */
    baseUrl: string | null;
    apiKey: string | null;
    /**
     * The models offered, the default first, with their prices in cents per million tokens; empty
     * with a base URL: the provider's own list (`GET {base}/models`) is read at start-up.
     */
    models: { id: string; inputCentsPerMillionTokens: number; outputCentsPerMillionTokens: number }[];
    /** How long a reply may take. */
    timeoutMs: number;
    /** How long a reply being generated is held by its instance without a renewal; then it is failed `interrupted`. */
    replyLeaseMs: number;
    /** How often each instance fails the replies whose instance stopped (and once at start). */
    replyRecoveryIntervalMs: number;
    /** The most model provider connections (bring your own key) one user may have. */
    connectionsPerUser: number;
    /**
     * The provider's image, transcription and speech models (MODEL_PROVIDER_IMAGE_MODELS…), each
     * with its price per image, second of audio or character, in millionths of a cent.
     */
    media: { image: MediaModelPrice[]; transcription: MediaModelPrice[]; speech: MediaModelPrice[] };
  };
  /** Generated media (src/areas/media). */
  media: {
    /** How long a media call may take before it is aborted and answered `504` (MEDIA_TIMEOUT_MS). */
    timeoutMs: number;
    /** The largest audio file that may be transcribed (MEDIA_MAX_AUDIO_BYTES). */
    maxAudioBytes: number;
    /** The largest image that may be edited (MEDIA_MAX_IMAGE_BYTES). */
    maxImageBytes: number;
  };
  tools: {
    /** Whether chat turns offer the caller's tools to the model (CHAT_TOOLS). */
    enabled: boolean;
    /** The most model calls in one chat turn (the last is made without tools). */
    maxSteps: number;
    /** How long one tool call may take. */
    callTimeoutMs: number;
    /** The most bytes of a tool call's result given to the model (and stored). */
    maxResultBytes: number;
    /** How long an approval waits for the user's decision. */
    approvalTtlMs: number;
    /** The operator's policies for built-in tools (BUILTIN_TOOL_POLICIES), replacing their defaults. */
    builtinPolicies: Record<string, 'allow' | 'approval_required' | 'deny'>;
  };
  automations: {
    /** How often each instance looks for due schedule slots (a six-field node-cron expression). */
    tickCron: string;
    /** How often each instance looks for queued runs. */
    pollIntervalMs: number;
    /** How long one run may take. */
    runTimeoutMs: number;
    /** Runs of one user running at once, across instances. */
    maxConcurrentRunsPerUser: number;
  };
  agents: {
    /** An environment with no heartbeat for this long is offline. */
    offlineAfterMs: number;
    /** How long a heartbeat's claim on a command lasts before it returns to the queue. */
    commandLeaseMs: number;
  };
  webhooks: {
    timeoutMs: number;
    /** Delays before the second, third… attempt. */
    retryScheduleMs: number[];
    /** A subscription failing for this long is disabled. */
    disableAfterMs: number;
    pollIntervalMs: number;
    concurrency: number;
    retentionMs: number;
  };
  /** Secrets at rest (src/platform/secrets.ts). */
  secrets: {
    /** SECRETS_KEY: the first seals, all open; empty when unset (development then generates one under DATA_DIR). */
    keys: SecretKey[];
    /** WEBHOOK_SECRETS_KEY, deprecated: its derived key (id `legacy`) stands in for SECRETS_KEY, and it opens the `v1:` webhook secrets. */
    webhookSecretsKey: string | null;
  };
  /** The app shell: discovery and onboarding. */
  shell: {
    /** MIN_CLIENT_VERSION: the oldest client version supported (semantic versioning), announced by discovery; null when unset. */
    minClientVersion: string | null;
    /** ONBOARDING_STEPS: the steps a new user walks through, in order. */
    onboardingSteps: string[];
  };
  /** Users' MCP servers (src/areas/mcp-servers). */
  mcp: {
    /** The most MCP servers one user may have. */
    serversPerUser: number;
    /** The most bytes one answer of an MCP server may have (a longer one fails the exchange). */
    maxResponseBytes: number;
  };
  /** Integrations: OAuth connections of users to operator-configured providers and to MCP servers (src/areas/integrations). */
  integrations: {
    /**
     * PUBLIC_URL: the service's public base URL, which browsers reach; the OAuth redirect URI is
     * `<publicUrl>/integrations/callback`. Outside production it defaults to http://localhost:<PORT>;
     * null in production without it (connecting is then refused).
     */
    publicUrl: string | null;
    /** INTEGRATIONS: the operator's OAuth 2.0 / OpenID Connect providers, in the order listed. */
    providers: IntegrationProvider[];
    /** How long an authorization URL (its state) can be completed. */
    stateTtlMs: number;
    /** INTEGRATIONS_RETURN_URL: the web-app page the callback sends the browser back to with the outcome; null: a small page says it. */
    returnUrl: string | null;
    /** How long one request to an authorization server may take. */
    timeoutMs: number;
  };
  /** The guard of every call to a URL a user chose (src/platform/net/outbound.ts). */
  outbound: {
    /** Lets loopback addresses (any port) through: tests and local development only. */
    allowLoopback: boolean;
    /** Ports allowed besides the scheme's default one. */
    allowedPorts: number[];
  };
}

export type { Entitlements, Plan };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

type Env = Record<string, string | undefined>;

class Reader {
  readonly problems: string[] = [];
  constructor(private readonly env: Env) {}

  raw(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  }

  string(name: string, fallback: string): string {
    return this.raw(name) ?? fallback;
  }

  optional(name: string): string | null {
    return this.raw(name) ?? null;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      this.problems.push(`${name} must be a whole number from ${min} to ${max} (got "${value}")`);
      return fallback;
    }
    return Number(value);
  }

  bool(name: string, fallback: boolean): boolean {
    const value = this.raw(name)?.toLowerCase();
    if (value === undefined) return fallback;
    if (['1', 'true', 'yes', 'on'].includes(value)) return true;
    if (['0', 'false', 'no', 'off'].includes(value)) return false;
    this.problems.push(`${name} must be true or false (got "${value}")`);
    return fallback;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (!(allowed as readonly string[]).includes(value)) {
      this.problems.push(`${name} must be one of ${allowed.join(', ')} (got "${value}")`);
      return fallback;
    }
    return value as T;
  }

  list(name: string): string[] {
    return (this.raw(name) ?? '')
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '');
  }

  url(name: string, protocols: string[]): string | null {
    const value = this.raw(name);
    if (value === undefined) return null;
    try {
      const url = new URL(value);
      if (!protocols.includes(url.protocol)) throw new Error('protocol');
      return value;
    } catch {
      this.problems.push(`${name} must be a ${protocols.join(' or ')} URL`);
      return null;
    }
  }
}

const SIZE = /^(\d+)\s*(b|kb|mb|gb)?$/i;

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration such as 500ms, 5s, 5m, 2h or 5d, in milliseconds (null when it is not one). */
export function parseDuration(value: string): number | null {
  const match = DURATION.exec(value.trim());
  return match ? Number(match[1]) * (DURATION_UNITS[match[2] as string] as number) : null;
}

function durations(reader: Reader, name: string, fallback: string): number[] {
  const raw = reader.raw(name) ?? fallback;
  const values = raw.split(',').map(parseDuration);
  if (values.some((v) => v === null) || values.length > 20) {
    reader.problems.push(`${name} must be a comma-separated list of at most 20 durations such as 5s,5m,2h (got "${raw}")`);
    return fallback.split(',').map((v) => parseDuration(v) as number);
  }
  return values as number[];
}

function duration(reader: Reader, name: string, fallback: string): number {
  const raw = reader.raw(name) ?? fallback;
  const value = parseDuration(raw);
  if (value === null) {
    reader.problems.push(`${name} must be a duration such as 30s, 12h or 5d (got "${raw}")`);
    return parseDuration(fallback) as number;
  }
  return value;
}

/** Bytes of a size such as 512kb or 5gb; null when it is not one. */
function sizeInBytes(value: string): number | null {
  const match = SIZE.exec(value);
  if (!match) return null;
  const factor = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(match[2] ?? 'b').toLowerCase()] ?? 1;
  return Number(match[1]) * factor;
}

function parseSize(reader: Reader, name: string, fallback: number): number {
  const value = reader.raw(name);
  if (value === undefined) return fallback;
  const bytes = sizeInBytes(value);
  if (bytes === null) reader.problems.push(`${name} must be a size such as 1mb, 512kb or 5gb (got "${value}")`);
  return bytes ?? fallback;
}

function optionalInt(reader: Reader, name: string): number | null {
  return reader.raw(name) === undefined ? null : reader.int(name, 0, 0, Number.MAX_SAFE_INTEGER);
}

const PLAN_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/**
 * BILLING_PLANS: a JSON object of plan id → `{ priceIds, monthlyBudgetCents, storage, automations }`
 * (the last three optional: absent is unlimited; storage is a size such as "10gb").
 */
function parsePlans(reader: Reader): Plan[] {
  const raw = reader.raw('BILLING_PLANS');
  if (raw === undefined) return [];
  const problem = (message: string) => reader.problems.push(`BILLING_PLANS ${message}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    problem('must be a JSON object such as {"pro":{"priceIds":["price_123"],"monthlyBudgetCents":2000,"storage":"10gb","automations":50}}');
    return [];
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    problem('must be a JSON object of plan ids');
    return [];
  }
  const plans: Plan[] = [];
  for (const [id, value] of Object.entries(parsed as Record<string, unknown>)) {
    const plan = (value ?? {}) as Record<string, unknown>;
    if (!PLAN_ID.test(id) || id === 'free' || id === 'self_hosted')
      problem(`plan ids are lower-case words other than free and self_hosted (got "${id}")`);
    const priceIds = plan.priceIds;
    if (!Array.isArray(priceIds) || priceIds.length === 0 || !priceIds.every((p) => typeof p === 'string' && p.length > 0)) {
      problem(`plan "${id}" needs priceIds: a non-empty list of the provider's price ids`);
    }
    const count = (field: string): number | null => {
      const v = plan[field];
      if (v === undefined || v === null) return null;
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) problem(`plan "${id}": ${field} must be a whole number ≥ 0`);
      return Number(v);
    };
    let storageBytes: number | null = null;
    if (plan.storage !== undefined && plan.storage !== null) {
      storageBytes = typeof plan.storage === 'string' ? sizeInBytes(plan.storage) : null;
      if (storageBytes === null) problem(`plan "${id}": storage must be a size such as "10gb"`);
    }
    plans.push({
      id,
      priceIds: Array.isArray(priceIds) ? priceIds.map(String) : [],
      entitlements: { monthlyBudgetCents: count('monthlyBudgetCents'), storageBytes, automations: count('automations') },
    });
  }
  const prices = plans.flatMap((p) => p.priceIds);
  if (new Set(prices).size !== prices.length) problem('lists a price id under more than one plan');
  return plans;
}

/**
 * One MODEL_PROVIDER_MODELS entry: a model id, optionally followed by `:input:output` prices in
 * cents per million tokens. Ids are opaque and may contain `:` and `/` (`llama3.1:8b`,
 * `meta-llama/Llama-3.1-8B`): an entry has prices exactly when its last two `:`-separated parts
 * are whole numbers, so `qwen2.5:7b` is an id, `gpt-4o-mini:15:60` an id with prices, and an id
 * that itself ends in two numbers is written with its prices (`model:1:2:0:0`).
 */
export /** `name=policy` pairs: `notes_create=deny,memory_save=allow`. */
function parseToolPolicies(r: Reader, name: string): Record<string, 'allow' | 'approval_required' | 'deny'> {
  const policies: Record<string, 'allow' | 'approval_required' | 'deny'> = {};
  for (const entry of r.list(name)) {
    const match = /^([a-zA-Z0-9_-]{1,64})=(allow|approval_required|deny)$/.exec(entry);
    if (match) policies[match[1] as string] = match[2] as 'allow' | 'approval_required' | 'deny';
    else
      r.problems.push(
        `${name} must be a comma-separated list of tool=policy, the policy allow, approval_required or deny (got "${entry}")`,
      );
  }
  return policies;
}

const MEDIA_PRICE = /^(.+)=(\d{1,9}(?:\.\d{1,6})?)$/;

/**
 * A MODEL_PROVIDER_IMAGE_MODELS (…_TRANSCRIPTION_…, …_SPEECH_…) list: model ids, each optionally
 * with its price in cents per unit after `=` (`dall-e-3=4`: 4 cents an image; `whisper-1=0.01`:
 * a hundredth of a cent a second; `tts-1=0.0015`: per character), at most six decimals.
 */
function parseMediaModels(r: Reader, name: string): MediaModelPrice[] {
  return r.list(name).map((entry) => {
    const priced = MEDIA_PRICE.exec(entry);
    const id = priced ? (priced[1] as string) : entry;
    if (id.length > 200 || /\s|=/.test(id))
      r.problems.push(`${name} entries are model ids, optionally with a price in cents per unit: dall-e-3=4 (got "${entry}")`);
    const [whole, fraction = ''] = (priced?.[2] ?? '0').split('.');
    return { id, microCentsPerUnit: Number(whole) * 1_000_000 + Number(fraction.padEnd(6, '0')) };
  });
}

function parseModelEntry(
  r: { problems: string[] },
  entry: string,
): { id: string; inputCentsPerMillionTokens: number; outputCentsPerMillionTokens: number } {
  const priced = /^(.+):(\d{1,9}):(\d{1,9})$/.exec(entry);
  const id = priced ? (priced[1] as string) : entry;
  if (id.length > 200 || /\s/.test(id) || /^:|:$/.test(id)) {
    r.problems.push(
      `MODEL_PROVIDER_MODELS entries are model ids (which may contain : and /), optionally with prices: gpt-4o-mini:15:60 (got "${entry}")`,
    );
  }
  return { id, inputCentsPerMillionTokens: Number(priced?.[2] ?? 0), outputCentsPerMillionTokens: Number(priced?.[3] ?? 0) };
}

/**
 * The secrets-at-rest keys and the outbound guard's settings, with their deprecated webhook-only
 * names as aliases (the new name wins; both set differently is a problem).
 */
function secretsAndOutbound(r: Reader, env: Config['env']): Pick<Config, 'secrets' | 'outbound'> {
  /** The name to read: the new one, else its deprecated alias if that one is set. */
  const aliased = (name: string, alias: string): string => {
    const value = r.raw(name);
    const old = r.raw(alias);
    if (value !== undefined && old !== undefined && value !== old)
      r.problems.push(`set ${name} only (${alias} is its deprecated alias, set to another value)`);
    return value === undefined && old !== undefined ? alias : name;
  };
  const secretsKey = r.raw('SECRETS_KEY');
  const parsed = secretsKey === undefined ? { keys: [], problems: [] } : parseSecretKeys(secretsKey);
  r.problems.push(...parsed.problems);
  const webhookSecretsKey = r.optional('WEBHOOK_SECRETS_KEY');
  if (webhookSecretsKey !== null && webhookSecretsKey.length < 32) r.problems.push('WEBHOOK_SECRETS_KEY must be at least 32 characters');
  const loopbackName = aliased('OUTBOUND_ALLOW_LOOPBACK', 'WEBHOOK_ALLOW_LOOPBACK');
  const allowLoopback = r.bool(loopbackName, false);
  if (env === 'production' && allowLoopback)
    r.problems.push(`${loopbackName} is for tests and local development; it cannot be set in production`);
  const portsName = aliased('OUTBOUND_ALLOWED_PORTS', 'WEBHOOK_ALLOWED_PORTS');
  const allowedPorts = r.list(portsName).map((port) => {
    if (!/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65535)
      r.problems.push(`${portsName} must list port numbers (got "${port}")`);
    return Number(port);
  });
  // Always required in production, not only once a secret is stored: a missing key then shows at
  // deploy time rather than at the first restart after a user saved a webhook or an API key.
  if (env === 'production' && secretsKey === undefined && webhookSecretsKey === null) {
    r.problems.push(
      'production needs SECRETS_KEY to seal stored secrets: <key id>:<32 random bytes in base64>, e.g. k1:<output of openssl rand -base64 32>',
    );
  }
  return { secrets: { keys: parsed.keys, webhookSecretsKey }, outbound: { allowLoopback, allowedPorts } };
}

const INTEGRATION_ID = /^[a-z][a-z0-9_-]{0,39}$/;
const INTEGRATION_EXAMPLE =
  '{"github":{"name":"GitHub","authorizationUrl":"https://github.com/login/oauth/authorize","tokenUrl":"https://github.com/login/oauth/access_token","clientId":"…","clientSecret":"…","scopes":["repo"]}}';

/**
 * INTEGRATIONS: a JSON object of integration id → provider: `name`, either `issuer` (an OpenID
 * Connect issuer, whose endpoints are discovered) or `authorizationUrl` and `tokenUrl` (and
 * optionally `revocationUrl`), `clientId`, optionally `clientSecret` (without one the client is
 * public: PKCE only), `scopes` and `authorizationParams` (extra parameters of the authorization
 * request, such as `{"access_type":"offline"}`). URLs are https (http outside production).
 */
function parseIntegrationProviders(r: Reader, env: Config['env']): IntegrationProvider[] {
  const raw = r.raw('INTEGRATIONS');
  if (raw === undefined) return [];
  const problem = (message: string) => r.problems.push(`INTEGRATIONS ${message}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    // The parser's message is not shown: it may quote the value, client secrets included.
    problem(`is not valid JSON; it must be a JSON object of integration ids, such as ${INTEGRATION_EXAMPLE}`);
    return [];
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    problem(`must be a JSON object of integration ids, such as ${INTEGRATION_EXAMPLE}`);
    return [];
  }
  const providers: IntegrationProvider[] = [];
  for (const [id, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (!INTEGRATION_ID.test(id)) problem(`ids are 1 to 40 lower-case letters, digits, _ or -, starting with a letter (got "${id}")`);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      problem(`"${id}" must be an object with name, clientId and either issuer or authorizationUrl and tokenUrl`);
      continue;
    }
    const entry = value as Record<string, unknown>;
    const known = [
      'name',
      'issuer',
      'authorizationUrl',
      'tokenUrl',
      'revocationUrl',
      'clientId',
      'clientSecret',
      'scopes',
      'authorizationParams',
    ];
    for (const field of Object.keys(entry))
      if (!known.includes(field)) problem(`"${id}" has an unknown field "${field}" (known: ${known.join(', ')})`);
    const text = (field: string, required: boolean): string | null => {
      const v = entry[field];
      if (v === undefined || v === null) {
        if (required) problem(`"${id}" needs ${field}`);
        return null;
      }
      if (typeof v !== 'string' || v.trim() === '') {
        problem(`"${id}": ${field} must be a non-empty string`);
        return null;
      }
      return v.trim();
    };
    const url = (field: string): string | null => {
      const v = text(field, false);
      if (v === null) return null;
      try {
        const parsedUrl = new URL(v);
        const allowed = env === 'production' ? ['https:'] : ['https:', 'http:'];
        if (!allowed.includes(parsedUrl.protocol)) throw new Error('protocol');
        if (parsedUrl.hash) throw new Error('fragment');
      } catch {
        problem(
          `"${id}": ${field} must be an ${env === 'production' ? 'https' : 'https (or, outside production, http)'} URL without a fragment`,
        );
        return null;
      }
      return v;
    };
    const name = text('name', true);
    if (name !== null && name.length > 100) problem(`"${id}": name must be at most 100 characters`);
    const issuer = url('issuer');
    const authorizationUrl = url('authorizationUrl');
    const tokenUrl = url('tokenUrl');
    const revocationUrl = url('revocationUrl');
    if (issuer !== null && (authorizationUrl !== null || tokenUrl !== null))
      problem(`"${id}": give either issuer (discovery) or authorizationUrl and tokenUrl, not both`);
    if (entry.issuer === undefined && (entry.authorizationUrl === undefined || entry.tokenUrl === undefined))
      problem(`"${id}" needs issuer, or authorizationUrl and tokenUrl`);
    const clientId = text('clientId', true);
    const clientSecret = text('clientSecret', false);
    const scopes = entry.scopes ?? [];
    if (!Array.isArray(scopes) || !scopes.every((s) => typeof s === 'string' && /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s))) {
      problem(`"${id}": scopes must be a list of scope names (printable characters, no spaces or quotes)`);
    }
    const params = entry.authorizationParams ?? {};
    const reserved = ['response_type', 'client_id', 'redirect_uri', 'scope', 'state', 'code_challenge', 'code_challenge_method'];
    if (
      typeof params !== 'object' ||
      params === null ||
      Array.isArray(params) ||
      !Object.values(params).every((v) => typeof v === 'string')
    ) {
      problem(`"${id}": authorizationParams must be an object of strings, such as {"access_type":"offline","prompt":"consent"}`);
    } else {
      for (const key of Object.keys(params))
        if (reserved.includes(key)) problem(`"${id}": authorizationParams cannot set ${key} (the service sets it)`);
    }
    providers.push({
      id,
      name: name ?? id,
      issuer,
      authorizationUrl,
      tokenUrl,
      revocationUrl,
      clientId: clientId ?? '',
      clientSecret,
      scopes: Array.isArray(scopes) ? scopes.map(String) : [],
      authorizationParams:
        typeof params === 'object' && params !== null && !Array.isArray(params) ? (params as Record<string, string>) : {},
    });
  }
  return providers;
}

function integrationSettings(r: Reader, env: Config['env']): Config['integrations'] {
  const providers = parseIntegrationProviders(r, env);
  let publicUrl = r.url('PUBLIC_URL', env === 'production' ? ['https:'] : ['https:', 'http:']);
  if (publicUrl !== null) {
    const url = new URL(publicUrl);
    if (url.search || url.hash || url.username || url.password)
      r.problems.push('PUBLIC_URL must be a base URL such as https://api.example.com (no query, fragment or credentials)');
    publicUrl = publicUrl.replace(/\/+$/, '');
  } else if (env !== 'production') {
    const port = r.raw('PORT');
    publicUrl = `http://localhost:${port !== undefined && /^\d{1,5}$/.test(port) ? Number(port) : 8080}`;
  } else if (providers.length > 0) {
    r.problems.push(
      'INTEGRATIONS needs PUBLIC_URL in production: the https base URL browsers reach the service at (the OAuth redirect URI is <PUBLIC_URL>/integrations/callback)',
    );
  }
  return {
    publicUrl,
    providers,
    stateTtlMs: r.int('INTEGRATION_STATE_TTL_SECONDS', 600, 60, 3600) * 1000,
    returnUrl: r.url('INTEGRATIONS_RETURN_URL', env === 'production' ? ['https:'] : ['https:', 'http:']),
    timeoutMs: r.int('INTEGRATION_TIMEOUT_MS', 15_000, 100, 120_000),
  };
}

const SEMVER = /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/;
const STEP_ID = /^[a-z][a-z0-9_]{0,39}$/;

function shellSettings(r: Reader): Config['shell'] {
  const minClientVersion = r.optional('MIN_CLIENT_VERSION');
  if (minClientVersion !== null && (!SEMVER.test(minClientVersion) || minClientVersion.length > 64)) {
    r.problems.push(`MIN_CLIENT_VERSION must be a semantic version such as 2.3.0 (got "${minClientVersion}")`);
  }
  const listed = r.list('ONBOARDING_STEPS');
  for (const step of listed) {
    if (!STEP_ID.test(step)) r.problems.push(`ONBOARDING_STEPS entries are lower-case words of letters, digits and _ (got "${step}")`);
  }
  if (new Set(listed).size !== listed.length) r.problems.push('ONBOARDING_STEPS lists a step twice');
  return { minClientVersion, onboardingSteps: listed.length > 0 ? listed : [...DEFAULT_ONBOARDING_STEPS] };
}

export function loadConfig(env: Env = process.env): Config {
  const r = new Reader(env);
  const nodeEnv = r.oneOf('NODE_ENV', ['development', 'production', 'test'] as const, 'development');
  const databaseUrl = r.url('DATABASE_URL', ['postgres:', 'postgresql:']);
  const publicKeyPem = r.optional('AUTH_PUBLIC_KEY')?.replace(/\\n/g, '\n') ?? null;
  const algorithms = r.list('AUTH_ALGORITHMS');
  const allowedAlgorithms = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
  for (const alg of algorithms) {
    if (!allowedAlgorithms.includes(alg)) {
      r.problems.push(`AUTH_ALGORITHMS may only list asymmetric algorithms (${allowedAlgorithms.join(', ')}); got "${alg}"`);
    }
  }
  const config: Config = {
    env: nodeEnv,
    port: r.int('PORT', 8080, 0, 65535),
    host: r.string('HOST', '0.0.0.0'),
    dataDir: path.resolve(r.string('DATA_DIR', './.data')),
    databaseUrl,
    databasePoolSize: r.int('DATABASE_POOL_SIZE', 10, 1, 200),
    logLevel: r.oneOf('LOG_LEVEL', ['error', 'warn', 'info', 'debug', 'silent'] as const, 'info'),
    bodyLimitBytes: parseSize(r, 'BODY_LIMIT', 1024 * 1024),
    trustProxy: r.bool('TRUST_PROXY', false),
    validateResponses: r.bool('VALIDATE_RESPONSES', false),
    shutdownTimeoutMs: r.int('SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    shutdownDrainMs: r.int('SHUTDOWN_DRAIN_MS', 5_000, 0, 600_000),
    http: {
      headersTimeoutMs: r.int('HTTP_HEADERS_TIMEOUT_MS', 10_000, 1_000, 600_000),
      requestTimeoutMs: r.int('HTTP_REQUEST_TIMEOUT_MS', 0, 0, 86_400_000),
      keepAliveTimeoutMs: r.int('HTTP_KEEP_ALIVE_TIMEOUT_MS', 5_000, 0, 600_000),
      bodyTimeoutMs: r.int('HTTP_BODY_TIMEOUT_MS', 20_000, 100, 600_000),
      bodyMinBytesPerSecond: r.int('HTTP_BODY_MIN_BYTES_PER_SECOND', 1_024, 1, 1_000_000_000),
      maxConnections: r.int('HTTP_MAX_CONNECTIONS', 10_000, 0, 1_000_000),
    },
    authFailuresPerMinute: r.int('AUTH_FAILURES_PER_MINUTE', 30, 0, 1_000_000),
    auth: {
      jwksUrl: r.url('AUTH_JWKS_URL', ['https:', 'http:']),
      publicKeyPem,
      issuer: r.optional('AUTH_ISSUER'),
      audience: r.optional('AUTH_AUDIENCE'),
      algorithms: algorithms.length > 0 ? algorithms : ['RS256', 'ES256'],
      cookieSecret: r.optional('COOKIE_SECRET'),
      sessionIdleMs: r.int('SESSION_IDLE_MINUTES', 12 * 60, 1, 60 * 24 * 30) * 60_000,
      sessionAbsoluteMs: r.int('SESSION_ABSOLUTE_HOURS', 7 * 24, 1, 24 * 365) * 3_600_000,
      allowedOrigins: r.list('ALLOWED_ORIGINS'),
    },
    capabilities: {
      automations: r.bool('CAPABILITY_AUTOMATIONS', true),
      billing: r.bool('CAPABILITY_BILLING', false),
      vectorSearch: r.bool('CAPABILITY_VECTOR_SEARCH', true),
      byok: r.bool('CAPABILITY_BYOK', true),
      mcp: r.bool('CAPABILITY_MCP', true),
      integrations: r.bool('CAPABILITY_INTEGRATIONS', true),
      billingProvider: r.oneOf('BILLING_PROVIDER', ['stripe'] as const, 'stripe'),
      cacheMs: r.int('CAPABILITY_CACHE_MS', 2000, 0, 60_000),
    },
    billing: {
      currency: r.string('BILLING_CURRENCY', 'usd'),
      defaultEntitlements: {
        monthlyBudgetCents: optionalInt(r, 'ENTITLEMENT_MONTHLY_BUDGET_CENTS'),
        storageBytes: r.raw('ENTITLEMENT_STORAGE') === undefined ? null : parseSize(r, 'ENTITLEMENT_STORAGE', 0),
        automations: optionalInt(r, 'ENTITLEMENT_AUTOMATIONS'),
      },
      plans: parsePlans(r),
      stripe: {
        webhookSecret: r.optional('STRIPE_WEBHOOK_SECRET'),
        toleranceSeconds: r.int('STRIPE_WEBHOOK_TOLERANCE_SECONDS', 300, 10, 3600),
      },
    },
    rateLimitPerMinute: r.int('RATE_LIMIT_PER_MINUTE', 600, 0, 1_000_000),
    bootstrapAdminUserIds: r.list('BOOTSTRAP_ADMIN_USER_IDS'),
    metricsToken: r.optional('METRICS_TOKEN'),
    storage: {
      s3: r.raw('S3_BUCKET')
        ? {
            endpoint: r.url('S3_ENDPOINT', ['http:', 'https:']),
            bucket: r.string('S3_BUCKET', ''),
            region: r.string('S3_REGION', 'us-east-1'),
            accessKeyId: r.optional('S3_ACCESS_KEY_ID'),
            secretAccessKey: r.optional('S3_SECRET_ACCESS_KEY'),
            forcePathStyle: r.bool('S3_FORCE_PATH_STYLE', r.raw('S3_ENDPOINT') !== undefined),
          }
        : null,
      maxUploadBytes: parseSize(r, 'MAX_UPLOAD_BYTES', 5 * 1024 ** 3),
      maxOutputBytes: parseSize(r, 'MAX_OUTPUT_BYTES', 1024 ** 3),
      incomingMaxAgeMs: duration(r, 'INCOMING_UPLOAD_MAX_AGE', '24h'),
      incomingSweepIntervalMs: duration(r, 'INCOMING_UPLOAD_SWEEP_INTERVAL', '1h'),
    },
    signedUrlTtlSeconds: r.int('SIGNED_URL_TTL_SECONDS', 300, 10, 86_400),
    ingestMaxBytes: parseSize(r, 'INGEST_MAX_BYTES', 64 * 1024 * 1024),
    embeddings: {
      provider: r.oneOf('EMBEDDINGS_PROVIDER', ['builtin-hashing', 'http'] as const, 'builtin-hashing'),
      baseUrl: r.url('EMBEDDINGS_BASE_URL', ['http:', 'https:']),
      apiKey: r.optional('EMBEDDINGS_API_KEY'),
      model: r.string('EMBEDDINGS_MODEL', 'text-embedding-3-small'),
      dimensions: r.raw('EMBEDDINGS_DIMENSIONS') === undefined ? null : r.int('EMBEDDINGS_DIMENSIONS', 256, 1, 16_000),
      queryTimeoutMs: r.int('EMBEDDINGS_QUERY_TIMEOUT_MS', 5000, 100, 60_000),
      indexIntervalMs: r.int('KNOWLEDGE_INDEX_INTERVAL_MS', 2000, 100, 3_600_000),
      indexMaxBackoffMs: r.int('KNOWLEDGE_INDEX_MAX_BACKOFF_MS', 300_000, 100, 86_400_000),
    },
    models: {
      baseUrl: r.url('MODEL_PROVIDER_BASE_URL', ['http:', 'https:']),
      apiKey: r.optional('MODEL_PROVIDER_API_KEY'),
      provider: r.oneOf(
        'MODEL_PROVIDER',
        ['openai-compatible', 'development'] as const,
        r.raw('MODEL_PROVIDER_BASE_URL') ? 'openai-compatible' : 'development',
      ),
      models: r.list('MODEL_PROVIDER_MODELS').map((entry) => parseModelEntry(r, entry)),
      timeoutMs: r.int('CHAT_TIMEOUT_MS', 60_000, 100, 600_000),
      replyLeaseMs: r.int('CHAT_REPLY_LEASE_MS', 30_000, 300, 600_000),
      replyRecoveryIntervalMs: r.int('CHAT_REPLY_RECOVERY_INTERVAL_MS', 10_000, 10, 600_000),
      connectionsPerUser: r.int('MODEL_CONNECTIONS_PER_USER', 20, 0, 1000),
      media: {
        image: parseMediaModels(r, 'MODEL_PROVIDER_IMAGE_MODELS'),
        transcription: parseMediaModels(r, 'MODEL_PROVIDER_TRANSCRIPTION_MODELS'),
        speech: parseMediaModels(r, 'MODEL_PROVIDER_SPEECH_MODELS'),
      },
    },
    media: {
      timeoutMs: r.int('MEDIA_TIMEOUT_MS', 120_000, 100, 600_000),
      maxAudioBytes: parseSize(r, 'MEDIA_MAX_AUDIO_BYTES', 25 * 1024 * 1024),
      maxImageBytes: parseSize(r, 'MEDIA_MAX_IMAGE_BYTES', 20 * 1024 * 1024),
    },
    tools: {
      enabled: r.bool('CHAT_TOOLS', true),
      maxSteps: r.int('TOOL_MAX_STEPS', 8, 1, 50),
      callTimeoutMs: r.int('TOOL_CALL_TIMEOUT_MS', 30_000, 10, 600_000),
      maxResultBytes: r.int('TOOL_RESULT_MAX_BYTES', 32_768, 256, 1_048_576),
      approvalTtlMs: r.int('APPROVAL_TTL_MS', 3_600_000, 100, 604_800_000),
      builtinPolicies: parseToolPolicies(r, 'BUILTIN_TOOL_POLICIES'),
    },
    automations: {
      tickCron: r.string('AUTOMATION_TICK_CRON', '*/10 * * * * *'),
      pollIntervalMs: r.int('AUTOMATION_POLL_INTERVAL_MS', 1000, 10, 60_000),
      runTimeoutMs: r.int('AUTOMATION_RUN_TIMEOUT_MS', 300_000, 100, 3_600_000),
      maxConcurrentRunsPerUser: r.int('AUTOMATION_MAX_CONCURRENT_RUNS', 2, 1, 100),
    },
    agents: {
      offlineAfterMs: r.int('AGENT_OFFLINE_AFTER_MS', 90_000, 1000, 3_600_000),
      commandLeaseMs: r.int('AGENT_COMMAND_LEASE_MS', 60_000, 100, 3_600_000),
    },
    webhooks: {
      timeoutMs: r.int('WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
      retryScheduleMs: durations(r, 'WEBHOOK_RETRY_SCHEDULE', '5s,5m,30m,2h,5h,10h,10h'),
      disableAfterMs: duration(r, 'WEBHOOK_DISABLE_AFTER', '5d'),
      pollIntervalMs: r.int('WEBHOOK_POLL_INTERVAL_MS', 1000, 10, 60_000),
      concurrency: r.int('WEBHOOK_CONCURRENCY', 32, 1, 256),
      retentionMs: r.int('WEBHOOK_LOG_RETENTION_DAYS', 30, 1, 3650) * 86_400_000,
    },
    mcp: {
      serversPerUser: r.int('MCP_SERVERS_PER_USER', 20, 0, 1000),
      maxResponseBytes: r.int('MCP_MAX_RESPONSE_BYTES', 16 * 1024 * 1024, 64 * 1024, 256 * 1024 * 1024),
    },
    shell: shellSettings(r),
    integrations: integrationSettings(r, nodeEnv),
    ...secretsAndOutbound(r, nodeEnv),
  };

  for (const origin of config.auth.allowedOrigins) {
    try {
      if (new URL(origin).origin !== origin) throw new Error('not an origin');
    } catch {
      r.problems.push(`ALLOWED_ORIGINS entries must be origins such as https://app.example.com (got "${origin}")`);
    }
  }
  if ((config.storage.s3?.accessKeyId === null) !== (config.storage.s3?.secretAccessKey === null)) {
    r.problems.push('set both S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, or neither (to use the default AWS credential chain)');
  }
  if (config.embeddings.provider === 'http' && !config.embeddings.baseUrl) {
    r.problems.push('EMBEDDINGS_PROVIDER=http needs EMBEDDINGS_BASE_URL (an OpenAI-compatible API)');
  }
  if (!config.models.baseUrl && config.models.models.length > 0) {
    r.problems.push('MODEL_PROVIDER_MODELS needs MODEL_PROVIDER_BASE_URL (an OpenAI-compatible API)');
  }
  for (const kind of ['image', 'transcription', 'speech'] as const) {
    if (!config.models.baseUrl && config.models.media[kind].length > 0) {
      r.problems.push(
        `MODEL_PROVIDER_${kind.toUpperCase()}_MODELS needs MODEL_PROVIDER_BASE_URL (an API in OpenAI's format); the development provider has its own media models`,
      );
    }
  }
  if (config.storage.incomingMaxAgeMs < 60_000)
    r.problems.push('INCOMING_UPLOAD_MAX_AGE must be at least 1m (longer than any upload, e.g. 24h)');
  if (config.storage.incomingSweepIntervalMs < 1000 || config.storage.incomingSweepIntervalMs > 2 ** 31 - 1) {
    r.problems.push('INCOMING_UPLOAD_SWEEP_INTERVAL must be a duration from 1s to 24d');
  }
  if (config.env === 'production' && !config.models.baseUrl && r.raw('MODEL_PROVIDER') === undefined) {
    r.problems.push(
      'production needs a model provider: set MODEL_PROVIDER_BASE_URL (an OpenAI-compatible API), or MODEL_PROVIDER=development to serve the built-in development model (not an AI)',
    );
  } else if (config.models.provider === 'openai-compatible' && !config.models.baseUrl) {
    r.problems.push('MODEL_PROVIDER=openai-compatible needs MODEL_PROVIDER_BASE_URL (an OpenAI-compatible API)');
  }
  if (config.models.provider === 'development' && config.models.baseUrl) {
    r.problems.push('MODEL_PROVIDER=development cannot be combined with MODEL_PROVIDER_BASE_URL');
  }
  if (!cron.validate(config.automations.tickCron)) {
    r.problems.push(`AUTOMATION_TICK_CRON must be a cron expression such as */10 * * * * * (got "${config.automations.tickCron}")`);
  }
  if (!/^[a-z]{3}$/.test(config.billing.currency)) {
    r.problems.push(`BILLING_CURRENCY must be an ISO 4217 code in lower case, such as usd (got "${config.billing.currency}")`);
  }
  if (config.billing.stripe.webhookSecret !== null && !config.billing.stripe.webhookSecret.startsWith('whsec_')) {
    r.problems.push('STRIPE_WEBHOOK_SECRET must be the endpoint signing secret (whsec_…)');
  }
  if (config.metricsToken !== null && config.metricsToken.length < 16) {
    r.problems.push('METRICS_TOKEN must be at least 16 characters');
  }
  if (config.auth.jwksUrl && config.auth.publicKeyPem) {
    r.problems.push('set either AUTH_JWKS_URL or AUTH_PUBLIC_KEY, not both');
  }
  if (hasIdentityProvider(config) && (!config.auth.issuer || !config.auth.audience)) {
    r.problems.push('AUTH_ISSUER and AUTH_AUDIENCE are required with AUTH_JWKS_URL or AUTH_PUBLIC_KEY');
  }
  if (config.auth.cookieSecret !== null && config.auth.cookieSecret.length < 32) {
    r.problems.push('COOKIE_SECRET must be at least 32 characters');
  }
  if (config.env === 'production') {
    if (!hasIdentityProvider(config)) {
      r.problems.push('production needs an identity provider: set AUTH_JWKS_URL or AUTH_PUBLIC_KEY, with AUTH_ISSUER and AUTH_AUDIENCE');
    }
    if (!config.auth.cookieSecret) r.problems.push('production needs COOKIE_SECRET (at least 32 characters)');
  }
  for (const userId of config.bootstrapAdminUserIds) {
    if (userId.length > 200) r.problems.push('BOOTSTRAP_ADMIN_USER_IDS entries must be at most 200 characters');
  }
  if (config.http.requestTimeoutMs > 0 && config.http.requestTimeoutMs < config.http.headersTimeoutMs) {
    r.problems.push('HTTP_REQUEST_TIMEOUT_MS must be 0 or at least HTTP_HEADERS_TIMEOUT_MS');
  }
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return config;
}

export function hasIdentityProvider(config: Config): boolean {
  return config.auth.jwksUrl !== null || config.auth.publicKeyPem !== null;
}
