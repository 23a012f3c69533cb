import path from 'node:path';
import cookieParser from 'cookie-parser';
import express, { type Express } from 'express';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { agentHandlers } from './areas/agents/handlers';
import { AgentEnvironmentService } from './areas/agents/service';
import { auditHandlers } from './areas/audit/handlers';
import { AuditService } from './areas/audit/service';
import { billingHandlers } from './areas/billing/handlers';
import { BillingService } from './areas/billing/service';
import type { StripeEvents } from './areas/billing/stripe';
import { stripeWebhookRouter } from './areas/billing/webhook-route';
import { budgetHandlers } from './areas/budgets/handlers';
import { BudgetService } from './areas/budgets/service';
import { bootstrapHandlers } from './areas/bootstrap/handlers';
import { BootstrapService } from './areas/bootstrap/service';
import { capabilityHandlers } from './areas/capabilities/handlers';
import { discoveryHandlers } from './areas/discovery/handlers';
import { DiscoveryService } from './areas/discovery/service';
import { onboardingHandlers } from './areas/onboarding/handlers';
import { OnboardingService } from './areas/onboarding/service';
import { settingsHandlers } from './areas/settings/handlers';
import { BUILT_IN_DEFAULTS, type ModelCatalog, SettingsService } from './areas/settings/service';
import { knowledgeHandlers } from './areas/knowledge/handlers';
import { KnowledgeIndexer, KnowledgeService } from './areas/knowledge/service';
import { fileHandlers } from './areas/files/handlers';
import { FileService } from './areas/files/service';
import { outputHandlers } from './areas/outputs/handlers';
import { OutputService } from './areas/outputs/service';
import { CapabilityService } from './areas/capabilities/service';
import { memoryHandlers } from './areas/memory/handlers';
import { MemoryService } from './areas/memory/service';
import { noteHandlers } from './areas/notes/handlers';
import { NoteService } from './areas/notes/service';
import { principalHandlers } from './areas/principals/handlers';
import { PrincipalService } from './areas/principals/service';
import { projectHandlers } from './areas/projects/handlers';
import { ProjectService } from './areas/projects/service';
import { sessionHandlers } from './areas/sessions/handlers';
import { SessionService } from './areas/sessions/service';
import { skillHandlers } from './areas/skills/handlers';
import { SkillService } from './areas/skills/service';
import { automationHandlers } from './areas/automations/handlers';
import { countQueuedRuns } from './areas/automations/repository';
import { AutomationRunner, AutomationScheduler } from './areas/automations/runner';
import { AutomationService } from './areas/automations/service';
import { conversationHandlers } from './areas/conversations/handlers';
import { ReplyRecovery } from './areas/conversations/recovery';
import { ChatService } from './areas/conversations/service';
import { modelHandlers } from './areas/models/handlers';
import { WebhookDispatcher } from './areas/webhooks/dispatcher';
import { countPendingDeliveries } from './areas/webhooks/repository';
import { webhookHandlers } from './areas/webhooks/handlers';
import { WebhookService } from './areas/webhooks/service';
import { sealedColumns as webhookSealedColumns } from './areas/webhooks/signing';
import { ConfigError, type Config, hasIdentityProvider } from './config';
import { limitAuthFailures, resolveCaller, securityHandlers } from './http/auth';
import { requireDeclaredCapability } from './http/capability-gate';
import { cors } from './http/cors';
import { serveDocs } from './http/docs';
import { apiNotFound, errorMiddleware } from './http/error-middleware';
import type { HandlerMap } from './http/handler';
import { apiRouter, loadApiDocument } from './http/openapi';
import { perUserRateLimit } from './http/rate-limit';
import { requestLog } from './http/request-log';
import { requireRoles } from './http/roles';
import { securityHeaders } from './http/security-headers';
import './http/types';
import { type DatabaseHandle, isReachable, openPglite, openPostgres } from './platform/db';
import { migrateToLatest } from './platform/db/migrate';
import { IdempotencyStore } from './platform/idempotency';
import { EmbeddingsFailure, HashingEmbedder, HttpEmbedder } from './platform/ai/embeddings';
import { DevelopmentProvider, findModel, listProviderModels, type ModelPrice, type ModelProvider, ModelProviderFailure, OpenAICompatibleProvider } from './platform/ai/models';
import { hasVectorExtension } from './platform/db/vector';
import { accessLog, type Logger } from './platform/logger';
import { Metrics } from './platform/metrics';
import { memoryRateLimiter, type RateLimiter, SharedRateLimiter } from './platform/rate-limiter';
import { SignedUrls } from './platform/signed-urls';
import type { ObjectStore } from './platform/storage';
import { LocalObjectStore } from './platform/storage/local';
import { Outbound } from './platform/net/outbound';
import { keyFromMaterial, LEGACY_KEY_ID, loadDevSecretKey, type SealedColumn, type SecretKey, Secrets } from './platform/secrets';
import { PeriodicTask } from './platform/workers';
import { createTokenVerifier, type DevAuthMaterial, loadDevAuthMaterial } from './platform/tokens';

export interface Services {
  knowledge: KnowledgeService;
  files: FileService;
  outputs: OutputService;
  audit: AuditService;
  principals: PrincipalService;
  budgets: BudgetService;
  billing: BillingService;
  /** Inbound payment-provider events; null without STRIPE_WEBHOOK_SECRET. */
  stripeEvents: StripeEvents | null;
  sessions: SessionService;
  capabilities: CapabilityService;
  projects: ProjectService;
  notes: NoteService;
  memory: MemoryService;
  skills: SkillService;
  webhooks: WebhookService;
  chat: ChatService;
  automations: AutomationService;
  agents: AgentEnvironmentService;
  /** The model provider chat and automations call. */
  models: ModelProvider;
  settings: SettingsService;
  onboarding: OnboardingService;
  bootstrap: BootstrapService;
  discovery: DiscoveryService;
}

export interface Runtime {
  app: Express;
  config: Config;
  database: DatabaseHandle;
  services: Services;
  /** Development signing material (null with an identity provider). */
  devAuth: DevAuthMaterial | null;
  /** Seals and opens every stored secret. */
  secrets: Secrets;
  /** The guard of every request to a URL a user chose. */
  outbound: Outbound;
  /** Embeds new and changed records in the background. */
  indexer: KnowledgeIndexer;
  /** Delivers outgoing webhooks in the background. */
  dispatcher: WebhookDispatcher;
  /** Queues the runs of due schedule slots (node-cron ticks). */
  scheduler: AutomationScheduler;
  /** Executes queued automation runs. */
  runner: AutomationRunner;
  /** Renews the leases of the chat replies being generated here; fails those whose instance stopped. */
  replies: ReplyRecovery;
  /** Removes the partial objects of uploads that never ended. */
  incomingSweep: PeriodicTask;
  /** Fails as `interrupted` the replies this instance is still generating (a shutdown that cannot wait). */
  interruptReplies(): Promise<number>;
  metrics: Metrics;
  /** Marks the instance as draining: /readyz answers 503 from then on. */
  drain(): void;
  close(): Promise<void>;
}

/**
 * The models to offer: MODEL_PROVIDER_MODELS, or the provider's own list (`GET {base}/models`,
 * free of charge) when only a base URL is set. A list that cannot be read stops the start.
 */
async function resolveModels(config: Config, logger: Logger): Promise<ModelPrice[]> {
  const { baseUrl, apiKey, models } = config.models;
  if (!baseUrl) {
    if (config.env === 'production') {
      logger.warn('MODEL_PROVIDER=development: serving the built-in development model, which is NOT an AI (it quotes the user). Set MODEL_PROVIDER_BASE_URL for a real model.');
    }
    return [];
  }
  if (models.length > 0) return [...models];
  try {
    const ids = await listProviderModels({ baseUrl, apiKey });
    logger.info('read the model provider\'s model list (MODEL_PROVIDER_MODELS is not set); the first is the default, all priced 0', { models: ids });
    return ids.map((id) => ({ id, inputCentsPerMillionTokens: 0, outputCentsPerMillionTokens: 0 }));
  } catch (error) {
    const failure = error instanceof ModelProviderFailure ? error : new ModelProviderFailure(String(error));
    throw new ConfigError([
      `MODEL_PROVIDER_MODELS is not set and the model list of MODEL_PROVIDER_BASE_URL (GET ${baseUrl.replace(/\/$/, '')}/models) could not be read: ${failure.message} (${failure.detail}). ` +
        'Set MODEL_PROVIDER_MODELS to the model ids it offers, the default first.',
    ]);
  }
}

/** S3 when a bucket is configured, otherwise a directory under DATA_DIR. */
export function openObjectStore(config: Config): ObjectStore {
  if (!config.storage.s3) return new LocalObjectStore(path.join(config.dataDir, 'objects'));
  // Loaded only when used, like the payment provider's library and the embedded database: the AWS
  // SDK is a fifth of an idle instance's memory.
  const { S3ObjectStore } = require('./platform/storage/s3') as typeof import('./platform/storage/s3');
  return new S3ObjectStore(config.storage.s3);
}

/** Every column holding sealed secrets, for key rotation (each area that stores secrets adds its own). */
export const SEALED_COLUMNS: readonly SealedColumn[] = [...webhookSealedColumns];

/**
 * The secrets-at-rest keys: SECRETS_KEY (the first seals); the key derived from the deprecated
 * WEBHOOK_SECRETS_KEY, which seals when SECRETS_KEY is unset and opens otherwise; else, outside
 * production, the development key under DATA_DIR. The `v1:` webhook secrets of earlier versions
 * open with WEBHOOK_SECRETS_KEY, else the cookie secret they were sealed with.
 */
export function openSecrets(config: Config, cookieSecret: string | null): Secrets {
  const { keys, webhookSecretsKey } = config.secrets;
  const all: SecretKey[] = [...keys, ...(webhookSecretsKey ? [keyFromMaterial(LEGACY_KEY_ID, webhookSecretsKey)] : [])];
  if (all.length === 0) {
    if (config.env === 'production') throw new Error('production needs SECRETS_KEY');
    all.push(loadDevSecretKey(config.dataDir));
  }
  return new Secrets(all, webhookSecretsKey ?? cookieSecret);
}

export async function openDatabase(config: Config): Promise<DatabaseHandle> {
  return config.databaseUrl
    ? openPostgres(config.databaseUrl, config.databasePoolSize, { preparedStatements: config.databasePreparedStatements })
    : openPglite(path.join(config.dataDir, 'pglite'));
}

function createServices(
  config: Config,
  database: DatabaseHandle,
  store: ObjectStore,
  signedUrls: SignedUrls,
  logger: Logger,
  vectorAvailable: boolean,
  dispatcher: WebhookDispatcher,
  secrets: Secrets,
  modelList: readonly ModelPrice[],
  doc: OpenAPIV3.DocumentV3,
): Services {
  const { db } = database;
  const audit = new AuditService(db);
  const projects = new ProjectService(db);
  const capabilities = new CapabilityService(db, audit, config.capabilities, Date.now, vectorAvailable);
  const warn = (message: string, meta: Record<string, unknown>) => logger.warn(message, meta);
  const { dimensions, queryTimeoutMs } = config.embeddings;
  const embedder =
    config.embeddings.provider === 'http'
      ? new HttpEmbedder({ baseUrl: config.embeddings.baseUrl as string, apiKey: config.embeddings.apiKey, model: config.embeddings.model, dimensions, queryTimeoutMs })
      : new HashingEmbedder(dimensions ?? undefined);
  const skills = new SkillService(db, projects);
  const webhooks = new WebhookService(db, secrets, dispatcher);
  const billing = new BillingService(db, capabilities, config.billing);
  const { webhookSecret, toleranceSeconds } = config.billing.stripe;
  let stripeEvents: StripeEvents | null = null;
  if (webhookSecret) {
    // The payment provider's library is loaded only when its events are received.
    const stripe = require('./areas/billing/stripe') as typeof import('./areas/billing/stripe');
    const settings = { webhookSecret, toleranceSeconds, currency: config.billing.currency, plans: config.billing.plans };
    stripeEvents = new stripe.StripeEvents(db, settings, (level, message, meta) => logger.log(level, message, meta));
  }
  const models: ModelProvider = config.models.baseUrl
    ? new OpenAICompatibleProvider({ baseUrl: config.models.baseUrl, apiKey: config.models.apiKey, models: modelList }, warn)
    : new DevelopmentProvider();
  const memory = new MemoryService(db, projects);
  const chat = new ChatService(db, models, projects, skills, webhooks, config.models.timeoutMs, billing, { leaseMs: config.models.replyLeaseMs }, memory);
  const files = new FileService(db, store, signedUrls, projects, { maxUploadBytes: config.storage.maxUploadBytes, ingestMaxBytes: config.ingestMaxBytes }, warn, billing, chat);
  const principals = new PrincipalService(db, audit);
  const catalog = deploymentCatalog(models);
  const settings = new SettingsService({ db, catalog, defaults: { ...BUILT_IN_DEFAULTS, models: { chat: findModel(models)?.id } } });
  const onboarding = new OnboardingService({ db, steps: config.shell.onboardingSteps, projects, files, settings });
  return {
    knowledge: new KnowledgeService(db, capabilities, projects, embedder, vectorAvailable, (level, message, meta) => logger.log(level, message, meta)),
    files,
    outputs: new OutputService(db, store, config.storage.maxOutputBytes, warn),
    audit,
    principals,
    budgets: new BudgetService(db, audit),
    billing,
    stripeEvents,
    sessions: new SessionService(db, { idleMs: config.auth.sessionIdleMs, absoluteMs: config.auth.sessionAbsoluteMs }),
    capabilities,
    projects,
    notes: new NoteService(db, projects),
    memory,
    skills,
    webhooks,
    chat,
    automations: new AutomationService(db, models, projects, skills, config.automations.runTimeoutMs, billing),
    agents: new AgentEnvironmentService(db, config.agents),
    models,
    settings,
    onboarding,
    bootstrap: new BootstrapService({
      principals,
      capabilities,
      settings,
      catalog,
      billing,
      onboarding,
      limits: {
        maxUploadBytes: config.storage.maxUploadBytes,
        maxMessageChars: messageMaxLength(doc),
        rateLimitPerMinute: config.rateLimitPerMinute > 0 ? config.rateLimitPerMinute : null,
      },
    }),
    discovery: new DiscoveryService({
      capabilities,
      settings: { apiVersion: doc.info.version, minClientVersion: config.shell.minClientVersion, oidcIssuer: oidcIssuer(config) },
    }),
  };
}

/** The models users can use: the deployment provider's, all of kind `chat`. */
function deploymentCatalog(provider: ModelProvider): ModelCatalog {
  const models = provider.models.map((m) => ({ modelId: m.id, kinds: ['chat'] }));
  return { available: async () => models };
}

/** The longest chat message, as the document's message schema allows it. */
function messageMaxLength(doc: OpenAPIV3.DocumentV3): number {
  const schema = doc.components?.schemas?.MessageCreateRequest as OpenAPIV3.SchemaObject | undefined;
  const content = schema?.properties?.content as OpenAPIV3.SchemaObject | undefined;
  if (content?.maxLength === undefined) throw new Error('the document gives no maxLength for a message\'s content');
  return content.maxLength;
}

/** The identity provider's issuer when it is an OpenID Connect issuer (an https URL; http in development). */
function oidcIssuer(config: Config): string | null {
  const issuer = config.auth.issuer;
  if (!hasIdentityProvider(config) || issuer === null) return null;
  try {
    const { protocol } = new URL(issuer);
    return protocol === 'https:' || (protocol === 'http:' && config.env !== 'production') ? issuer : null;
  } catch {
    return null;
  }
}

/** The logging function the background workers take. */
const workerLog =
  (logger: Logger) =>
  (level: 'info' | 'warn' | 'error', message: string, meta: Record<string, unknown>): void => {
    logger.log(level, message, meta);
  };

function createDispatcher(config: Config, database: DatabaseHandle, secrets: Secrets, outbound: Outbound, logger: Logger, metrics: Metrics): WebhookDispatcher {
  return new WebhookDispatcher(
    database.db,
    secrets,
    outbound,
    config.webhooks,
    { log: workerLog(logger), onAttempt: (outcome) => metrics.deliveryAttempts.inc({ outcome }) },
  );
}

/** The metrics, with the queue depths read from the database at each scrape. */
function createMetrics(database: DatabaseHandle): Metrics {
  return new Metrics({
    pendingDeliveries: () => countPendingDeliveries(database.db),
    queuedRuns: () => countQueuedRuns(database.db),
    pool: () => database.poolStats(),
  });
}

/** Counted in the shared database so every instance shares one count; the embedded one belongs to one process. */
function rateLimiter(database: DatabaseHandle, perMinute: number): RateLimiter {
  return database.kind === 'postgres' ? new SharedRateLimiter(database.db, perMinute) : memoryRateLimiter(perMinute);
}

function handlerMap(services: Services, config: Config, runner: AutomationRunner): HandlerMap {
  return {
    ...sessionHandlers(services.sessions, { secure: config.env !== 'development' }),
    ...discoveryHandlers(services.discovery),
    ...bootstrapHandlers(services.bootstrap),
    ...settingsHandlers(services.settings),
    ...onboardingHandlers(services.onboarding),
    ...capabilityHandlers(services.capabilities),
    ...projectHandlers(services.projects),
    ...noteHandlers(services.notes),
    ...memoryHandlers(services.memory),
    ...skillHandlers(services.skills),
    ...principalHandlers(services.principals),
    ...auditHandlers(services.audit),
    ...budgetHandlers(services.budgets),
    ...billingHandlers(services.billing),
    ...agentHandlers(services.agents),
    ...fileHandlers(services.files),
    ...outputHandlers(services.outputs),
    ...knowledgeHandlers(services.knowledge),
    ...webhookHandlers(services.webhooks),
    ...modelHandlers(services.models),
    ...conversationHandlers(services.chat, config.models.timeoutMs),
    ...automationHandlers(services.automations, runner),
  };
}

/**
 * Builds the whole service on an open database: migrations, authentication, the validated API
 * routes from the document, docs, health and errors.
 */
export async function createRuntime(config: Config, logger: Logger, database?: DatabaseHandle): Promise<Runtime> {
  const db = database ?? (await openDatabase(config));
  try {
    await migrateToLatest(db.db);
    const devAuth = hasIdentityProvider(config) ? null : await loadDevAuthMaterial(config.dataDir);
    const cookieSecret = config.auth.cookieSecret ?? devAuth?.cookieSecret;
    if (!cookieSecret) throw new Error('no cookie secret');
    const verifyToken = await createTokenVerifier(config.auth, devAuth);
    const store = openObjectStore(config);
    const signedUrls = new SignedUrls(cookieSecret, config.signedUrlTtlSeconds);
    const vectorAvailable = await hasVectorExtension(db.db);
    const secrets = openSecrets(config, cookieSecret);
    const outbound = new Outbound(config.outbound);
    const metrics = createMetrics(db);
    const dispatcher = createDispatcher(config, db, secrets, outbound, logger, metrics);
    const modelList = await resolveModels(config, logger);
    const doc = loadApiDocument();
    const services = createServices(config, db, store, signedUrls, logger, vectorAvailable, dispatcher, secrets, modelList, doc);
    const indexer = new KnowledgeIndexer(
      services.knowledge,
      config.embeddings.indexIntervalMs,
      (error, retryInMs, failures) =>
        // Embeddings failures are logged by the service when they start or change; other errors here.
        error instanceof EmbeddingsFailure
          ? logger.debug('knowledge indexing waits for the embeddings', { failures, retryInMs })
          : logger.warn('knowledge indexing failed', { error: (error as Error).message, failures, retryInMs }),
      config.embeddings.indexMaxBackoffMs,
    );
    const log = workerLog(logger);
    const runner = new AutomationRunner(db.db, services.automations, services.outputs, services.webhooks, services.capabilities, services.billing, config.automations, log, (status) =>
      metrics.runsFinished.inc({ status }),
    );
    const scheduler = new AutomationScheduler(db.db, services.capabilities, config.automations.tickCron, log, () => runner.wake());
    const replies = new ReplyRecovery(services.chat, { leaseMs: config.models.replyLeaseMs, sweepIntervalMs: config.models.replyRecoveryIntervalMs }, log);
    const incomingSweep = new PeriodicTask(
      config.storage.incomingSweepIntervalMs,
      async () => {
        const removed = await store.sweepIncoming(config.storage.incomingMaxAgeMs);
        if (removed > 0) logger.warn('removed partial objects of uploads that never ended', { objects: removed });
      },
      (error) => logger.error('sweeping partial uploads failed', { error: (error as Error).message }),
    );
    indexer.start();
    dispatcher.start();
    runner.start();
    scheduler.start();
    replies.start();
    incomingSweep.start();
    const bootstrapped = await services.principals.ensureRole(
      { userId: 'system:bootstrap', requestId: null },
      config.bootstrapAdminUserIds,
      'admin',
      'BOOTSTRAP_ADMIN_USER_IDS',
    );
    if (bootstrapped.length > 0) logger.info('granted admin from BOOTSTRAP_ADMIN_USER_IDS', { userIds: bootstrapped });
    let draining = false;

    const app = express();
    app.disable('x-powered-by');
    app.set('trust proxy', config.trustProxy);
    app.set('query parser', 'simple');
    // No automatic weak ETag on JSON answers (a hash of every body, undocumented); the content
    // routes set their own strong ETag.
    app.set('etag', false);
    app.use(requestLog(accessLog(logger), metrics));
    app.use(securityHeaders({ crossOriginEmbedderPolicy: false }));
    app.use(cors(config.auth.allowedOrigins, doc));
    app.get('/healthz', (_req, res) => {
      res.json({ status: 'ok' });
    });
    app.get('/readyz', async (_req, res) => {
      const [database, storage] = await Promise.all([isReachable(db.db), store.isReachable()]);
      const ready = database && storage && !draining;
      // Embeddings are reported, never a reason to be unready: search answers lexically without them.
      const embeddings = services.knowledge.embeddingsHealth.state;
      res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : draining ? 'draining' : 'not_ready', checks: { database, storage, draining, embeddings } });
    });
    app.get('/metrics', metrics.handler(config.metricsToken));
    serveDocs(app);
    if (services.stripeEvents) app.use(stripeWebhookRouter(services.stripeEvents));
    app.use(cookieParser(cookieSecret));
    app.use(
      await apiRouter(doc, handlerMap(services, config, runner), {
        validateResponses: config.validateResponses,
        // Checked wherever answers are (tests); a shipped document has passed lint and the contract test.
        validateApiSpec: config.validateResponses,
        bodyLimitBytes: config.bodyLimitBytes,
        idempotency: new IdempotencyStore(db.db),
        securityHandlers: securityHandlers(verifyToken, services.sessions, signedUrls),
        onAuthFailure: config.authFailuresPerMinute > 0 ? limitAuthFailures(rateLimiter(db, config.authFailuresPerMinute), config.authFailuresPerMinute) : undefined,
        afterSecurity: [
          resolveCaller(config.auth.allowedOrigins),
          ...(config.rateLimitPerMinute > 0 ? [perUserRateLimit(rateLimiter(db, config.rateLimitPerMinute), config.rateLimitPerMinute)] : []),
          requireDeclaredCapability(services.capabilities),
          requireRoles(services.principals),
        ],
      }),
    );
    app.use(apiNotFound);
    app.use(errorMiddleware(logger, config.bodyLimitBytes));

    return {
      app,
      config,
      database: db,
      services,
      devAuth,
      secrets,
      outbound,
      drain: () => {
        draining = true;
      },
      indexer,
      dispatcher,
      scheduler,
      runner,
      replies,
      incomingSweep,
      interruptReplies: () => services.chat.interruptGenerating(),
      metrics,
      close: async () => {
        await scheduler.stop();
        await Promise.all([indexer.stop(), dispatcher.stop(), runner.stop(), replies.stop(), incomingSweep.stop()]);
        store.close();
        await db.close();
      },
    };
  } catch (error) {
    if (!database) await db.close();
    throw error;
  }
}
