import cookieParser from 'cookie-parser';
import express, { type Express } from 'express';
import helmet from 'helmet';
import { accessTokenHandlers } from './areas/access-tokens/handlers';
import { agentHandlers } from './areas/agents/handlers';
import { auditHandlers } from './areas/audit/handlers';
import { billingHandlers } from './areas/billing/handlers';
import { stripeWebhookRouter } from './areas/billing/webhook-route';
import { bootstrapHandlers } from './areas/bootstrap/handlers';
import { budgetHandlers } from './areas/budgets/handlers';
import { capabilityHandlers } from './areas/capabilities/handlers';
import { discoveryHandlers } from './areas/discovery/handlers';
import { onboardingHandlers } from './areas/onboarding/handlers';
import { settingsHandlers } from './areas/settings/handlers';
import { knowledgeHandlers } from './areas/knowledge/handlers';
import { fileHandlers } from './areas/files/handlers';
import { outputHandlers } from './areas/outputs/handlers';
import { mediaHandlers } from './areas/media/handlers';
import { memoryHandlers } from './areas/memory/handlers';
import { noteHandlers } from './areas/notes/handlers';
import { grantHandlers } from './areas/grants/handlers';
import { groupHandlers } from './areas/groups/handlers';
import { quotaHandlers } from './areas/quotas/handlers';
import { principalHandlers } from './areas/principals/handlers';
import { projectHandlers } from './areas/projects/handlers';
import { sessionHandlers } from './areas/sessions/handlers';
import { skillHandlers } from './areas/skills/handlers';
import { automationHandlers } from './areas/automations/handlers';
import type { AutomationRunner } from './areas/automations/runner';
import { conversationHandlers } from './areas/conversations/handlers';
import { feedbackHandlers } from './areas/feedback/handlers';
import { integrationCallbackRouter } from './areas/integrations/callback-route';
import { integrationHandlers } from './areas/integrations/handlers';
import { mcpChallenge, oauthIssuer, oauthRouter } from './areas/oauth/authorization-route';
import { mcpWorkspaceHandlers } from './areas/mcp-server/handlers';
import { mcpServerHandlers } from './areas/mcp-servers/handlers';
import { toolHandlers } from './areas/tools/handlers';
import { groupModelPolicyHandlers, modelHandlers } from './areas/models/handlers';
import { openAiHandlers } from './areas/openai/handlers';
import { webhookHandlers } from './areas/webhooks/handlers';
import { compose, type Composition, type Services, type Workers } from './composition';
import type { Config } from './config';
import { limitAuthFailures, requireScope, resolveCaller, securityHandlers } from './http/auth';
import { requireDeclaredCapability } from './http/capability-gate';
import { CORS_PATHS, cors } from './http/cors';
import { serveDocs } from './http/docs';
import { apiNotFound, errorMiddleware } from './http/error-middleware';
import type { HandlerMap } from './http/handler';
import { LoadShedder } from './http/load-shed';
import { apiRouter } from './http/openapi';
import { perTokenRateLimit, perUserRateLimit } from './http/rate-limit';
import { requestLog } from './http/request-log';
import { requireRoles } from './http/roles';
import { API_HEADERS } from './http/security-headers';
import './http/types';
import { type DatabaseHandle, isReachable } from './platform/db';
import { IdempotencyStore } from './platform/idempotency';
import type { Logger } from './platform/logger';
import { memoryRateLimiter, postgresRateLimiter, type RateLimiter } from './platform/rate-limiter';

export type { Services } from './composition';

/** The running service: its composition's parts and workers, the Express app, and its life cycle. */
export interface Runtime
  extends Pick<Composition, 'config' | 'database' | 'services' | 'devAuth' | 'secrets' | 'outbound' | 'metrics'>, Workers {
  app: Express;
  /** Fails as `interrupted` the replies this instance is still generating (a shutdown that cannot wait). */
  interruptReplies(): Promise<number>;
  /** Marks the instance as draining: /readyz answers 503 from then on. */
  drain(): void;
  close(): Promise<void>;
}

/** Counted in the shared database so every instance shares one count; the embedded one belongs to one process. */
function rateLimiter(database: DatabaseHandle, perMinute: number): RateLimiter {
  return database.pool ? postgresRateLimiter(database.pool, perMinute) : memoryRateLimiter(perMinute);
}

function handlerMap(services: Services, config: Config, runner: AutomationRunner): HandlerMap {
  return {
    ...sessionHandlers(services.sessions, { secure: config.env !== 'development' }),
    ...accessTokenHandlers(services.accessTokens),
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
    ...groupHandlers(services.groups),
    ...groupModelPolicyHandlers(services.groupModelPolicies),
    ...grantHandlers(services.grants),
    ...quotaHandlers(services.quotas, services.usage),
    ...auditHandlers(services.audit),
    ...budgetHandlers(services.budgets),
    ...billingHandlers(services.billing),
    ...agentHandlers(services.agents),
    ...fileHandlers(services.files),
    ...outputHandlers(services.outputs),
    ...mediaHandlers(services.media),
    ...knowledgeHandlers(services.knowledge),
    ...webhookHandlers(services.webhooks),
    ...modelHandlers({
      models: services.models,
      connections: services.modelConnections,
      policy: services.modelPolicy,
      capabilities: services.capabilities,
    }),
    ...mcpServerHandlers(services.mcpServers),
    ...mcpWorkspaceHandlers(services.mcpWorkspace),
    ...integrationHandlers({
      integrations: services.integrations,
      authorization: services.integrationAuthorization,
      connections: services.integrationConnections,
    }),
    ...conversationHandlers(services.conversations, services.chat, config.models.timeoutMs),
    ...feedbackHandlers(services.feedback),
    ...toolHandlers(services.tools),
    ...automationHandlers(services.automations, runner),
    ...openAiHandlers(services.openai),
  };
}

/**
 * The Express app over the composed service: logging, security headers, CORS, the validated API
 * routes from the document (authentication, caller, rate limit, capability gate, role guard,
 * handlers), then health, metrics and docs, the payment provider's and the integrations' callback
 * routes, and the error rendering.
 */
export async function createApp(
  composition: Composition,
  logger: Logger,
  isDraining: () => boolean,
  shedder: LoadShedder,
): Promise<Express> {
  const { config, doc, database, services, metrics, store } = composition;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);
  // No automatic weak ETag on JSON answers (a hash of every body, undocumented); the content
  // routes set their own strong ETag.
  app.set('etag', false);
  app.use(requestLog(logger, metrics));
  app.use(helmet(API_HEADERS));
  app.use(CORS_PATHS, cors(config.auth.allowedOrigins, doc));
  // Before anything that costs: a refused request must be cheap (and readable by a browser client).
  app.use(shedder.middleware);
  app.use(cookieParser(composition.cookieSecret));
  app.use(
    await apiRouter(doc, handlerMap(services, config, composition.workers.runner), {
      validateResponses: config.validateResponses,
      // Checked wherever answers are (tests); a shipped document has passed lint and the contract test.
      validateApiSpec: config.validateResponses,
      bodyLimitBytes: config.bodyLimitBytes,
      idempotency: new IdempotencyStore(database.db),
      securityHandlers: securityHandlers(composition.verifyToken, services.sessions, composition.signedUrls, services.accessTokens),
      onAuthFailure:
        config.authFailuresPerMinute > 0
          ? limitAuthFailures(rateLimiter(database, config.authFailuresPerMinute), config.authFailuresPerMinute)
          : undefined,
      afterSecurity: [
        resolveCaller(config.auth.allowedOrigins),
        ...(config.rateLimitPerMinute > 0
          ? [perUserRateLimit(rateLimiter(database, config.rateLimitPerMinute), config.rateLimitPerMinute)]
          : []),
        ...(config.accessTokens.perMinute > 0
          ? [perTokenRateLimit(rateLimiter(database, config.accessTokens.perMinute), config.accessTokens.perMinute)]
          : []),
        requireScope,
        requireDeclaredCapability(services.capabilities),
        requireRoles(services.principals),
      ],
    }),
  );
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const [reachable, storage] = await Promise.all([isReachable(database.db), store.isReachable()]);
    const draining = isDraining();
    const ready = reachable && storage && !draining;
    // Embeddings are reported, never a reason to be unready: search answers lexically without them.
    const embeddings = services.knowledge.embeddingsHealth.state;
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ready' : draining ? 'draining' : 'not_ready',
      checks: { database: reachable, storage, draining, embeddings },
    });
  });
  app.get('/metrics', metrics.handler(config.metricsToken));
  serveDocs(app);
  if (services.stripeEvents) app.use(stripeWebhookRouter(services.stripeEvents));
  // The OAuth redirect URI of integrations (a web-app route outside /api/v1, authenticated by its state).
  app.use(integrationCallbackRouter(services.integrationAuthorization, services.sessions, { returnUrl: config.integrations.returnUrl }));
  // The authorization server of /mcp (OAuth 2.1 endpoints, metadata and the consent page).
  const oauth = { publicUrl: oauthIssuer(config.integrations.publicUrl), allowedOrigins: config.auth.allowedOrigins };
  if (oauth.publicUrl === null) logger.info('no OAuth sign-in for MCP clients: it needs an https PUBLIC_URL (they use access tokens)');
  app.use(oauthRouter(services.oauth, services.sessions, oauth));
  app.use(apiNotFound);
  app.use(
    errorMiddleware(logger, {
      bodyLimitBytes: config.bodyLimitBytes,
      requireDeclaredStatus: config.validateResponses,
      challengeOf: mcpChallenge(oauth),
    }),
  );
  return app;
}

/**
 * Builds the whole service (`compose`: database, migrations, secrets, services, workers) and wires
 * it into the Express app. The entry of server.ts and the tests.
 */
export async function createRuntime(config: Config, logger: Logger, database?: DatabaseHandle): Promise<Runtime> {
  const composition = await compose(config, logger, database);
  let draining = false;
  let app: Express;
  const shedder = new LoadShedder(config.loadShed, composition.metrics);
  try {
    app = await createApp(composition, logger, () => draining, shedder);
  } catch (error) {
    shedder.close();
    await composition.close();
    throw error;
  }
  const { services, workers } = composition;
  return {
    app,
    config,
    database: composition.database,
    services,
    devAuth: composition.devAuth,
    secrets: composition.secrets,
    outbound: composition.outbound,
    ...workers,
    metrics: composition.metrics,
    interruptReplies: () => services.chat.leases.interruptGenerating(),
    drain: () => {
      draining = true;
    },
    close: async () => {
      shedder.close();
      await composition.close();
    },
  };
}
