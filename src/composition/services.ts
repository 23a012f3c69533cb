import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types';
import { AgentEnvironmentService } from '../areas/agents/service';
import { AuditService } from '../areas/audit/service';
import { BillingService } from '../areas/billing/service';
import type { StripeEvents } from '../areas/billing/stripe';
import { BootstrapService } from '../areas/bootstrap/service';
import { BudgetService } from '../areas/budgets/service';
import { DiscoveryService } from '../areas/discovery/service';
import { OnboardingService } from '../areas/onboarding/service';
import { BUILT_IN_DEFAULTS, SettingsService } from '../areas/settings/service';
import { KnowledgeService } from '../areas/knowledge/service';
import { FileService } from '../areas/files/service';
import { OutputService } from '../areas/outputs/service';
import { MediaService } from '../areas/media/service';
import { CapabilityService } from '../areas/capabilities/service';
import { IntegrationAuthorizationService } from '../areas/integrations/authorization';
import { IntegrationConnectionService } from '../areas/integrations/connections';
import { OAuthFlows } from '../areas/integrations/flows';
import { IntegrationService } from '../areas/integrations/service';
import { McpExchanges, type McpObserver } from '../areas/mcp-servers/exchanges';
import { McpServerService } from '../areas/mcp-servers/service';
import { McpToolSource } from '../areas/mcp-servers/tool-source';
import { MemoryService } from '../areas/memory/service';
import { NoteService } from '../areas/notes/service';
import type { QuotaService } from '../areas/quotas/service';
import { UsageService } from '../areas/quotas/usage';
import { PrincipalService } from '../areas/principals/service';
import { ProjectService } from '../areas/projects/service';
import { SessionService } from '../areas/sessions/service';
import type { SkillService } from '../areas/skills/service';
import { AutomationService } from '../areas/automations/service';
import { type Chat, createChat } from '../areas/conversations/chat';
import { ConversationService } from '../areas/conversations/service';
import { FeedbackService } from '../areas/feedback/service';
import { BuiltinTools } from '../areas/tools/builtins';
import { ToolService } from '../areas/tools/service';
import { ModelCatalogue } from '../areas/models/catalogue';
import { ModelConnectionService } from '../areas/models/connections';
import { ModelPolicyService } from '../areas/models/policy';
import { ModelService } from '../areas/models/service';
import { WebhookDispatcher } from '../areas/webhooks/dispatcher';
import { WebhookService } from '../areas/webhooks/service';
import type { Config } from '../config';
import type { DatabaseHandle } from '../platform/db';
import { HashingEmbedder, HttpEmbedder } from '../platform/ai/embeddings';
import { DevelopmentProvider } from '../platform/ai/development-model';
import { findModel, type ModelPrice, type ModelProvider } from '../platform/ai/models';
import { OpenAICompatibleProvider } from '../platform/ai/sdk-chat';
import type { Logger } from '../platform/logger';
import { Metrics } from '../platform/metrics';
import { SignedUrls } from '../platform/signed-urls';
import type { ObjectStore } from '../platform/storage';
import { Outbound } from '../platform/net/outbound';
import { Secrets } from '../platform/secrets';
import { messageMaxLength, oidcIssuer } from './derived';
import { createDoors, type Doors } from './doors';
import { createSkills, type SkillReferenceServices } from './skills';
import { createTeams, type Teams } from './teams';
import { createQuotas } from './quotas';

export interface Services extends Doors, Teams {
  knowledge: KnowledgeService;
  files: FileService;
  outputs: OutputService;
  audit: AuditService;
  principals: PrincipalService;
  quotas: QuotaService;
  /** A user's own spending and limits. */
  usage: UsageService;
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
  conversations: ConversationService;
  /** Users' feedback on replies, and the administrators' list of it. */
  feedback: FeedbackService;
  /** Chat turns, their tool approvals, and the leases of the replies being generated here. */
  chat: Chat;
  automations: AutomationService;
  agents: AgentEnvironmentService;
  /** Which model serves a request: the deployment's and users' own connections' models, with each user's defaults. */
  models: ModelService;
  /** Users' connections to their own model providers, and their tests. */
  modelConnections: ModelConnectionService;
  /** The model policy administrators set. */
  modelPolicy: ModelPolicyService;
  /** Users' MCP servers. */
  mcpServers: McpServerService;
  /** The tools of users' MCP servers, a tool source of chat. */
  mcpTools: McpToolSource;
  /** The integrations a user can connect: the configured providers and their MCP servers that sign in with OAuth. */
  integrations: IntegrationService;
  /** Connecting to an integration: the authorization flow and its callback. */
  integrationAuthorization: IntegrationAuthorizationService;
  /** Users' OAuth connections in use (access tokens, refreshed when due) and disconnecting. */
  integrationConnections: IntegrationConnectionService;
  settings: SettingsService;
  /** Generated media: images, transcripts and speech, stored as outputs. */
  media: MediaService;
  /** The tool registry: built-in tools and the other tool sources (MCP servers). */
  tools: ToolService;
  onboarding: OnboardingService;
  bootstrap: BootstrapService;
  discovery: DiscoveryService;
}

/** What the services are built from besides the configuration and the database. */
export interface ServicesDeps {
  config: Config;
  database: DatabaseHandle;
  store: ObjectStore;
  signedUrls: SignedUrls;
  logger: Logger;
  vectorAvailable: boolean;
  dispatcher: WebhookDispatcher;
  secrets: Secrets;
  modelList: readonly ModelPrice[];
  outbound: Outbound;
  /** The API document (the app shell reports its version and limits). */
  doc: OpenAPIV3.DocumentV3;
  metrics: Metrics;
}

export function createServices({
  config,
  database,
  store,
  signedUrls,
  logger,
  vectorAvailable,
  dispatcher,
  secrets,
  modelList,
  outbound,
  doc,
  metrics,
}: ServicesDeps): Services {
  const { db } = database;
  const audit = new AuditService(db);
  const projects = new ProjectService(db);
  const capabilities = new CapabilityService({ db, audit, defaults: config.capabilities, vectorAvailable });
  const warn = (message: string, meta: Record<string, unknown>) => logger.warn(message, meta);
  const { dimensions, queryTimeoutMs } = config.embeddings;
  const embedder =
    config.embeddings.provider === 'http'
      ? new HttpEmbedder({
          baseUrl: config.embeddings.baseUrl as string,
          apiKey: config.embeddings.apiKey,
          model: config.embeddings.model,
          dimensions,
          queryTimeoutMs,
        })
      : new HashingEmbedder(dimensions ?? undefined);
  const skills = createSkills(db, projects, (): SkillReferenceServices => ({ models, tools, projects, files }));
  const webhooks = new WebhookService(db, secrets, dispatcher);
  const quotas = createQuotas(config, db, audit, webhooks);
  const billing = new BillingService({ db, capabilities, settings: config.billing, quotas });
  const { webhookSecret, toleranceSeconds } = config.billing.stripe;
  let stripeEvents: StripeEvents | null = null;
  if (webhookSecret) {
    // The payment provider's library is loaded only when its events are received.
    const stripe = require('../areas/billing/stripe') as typeof import('../areas/billing/stripe');
    const settings = { webhookSecret, toleranceSeconds, currency: config.billing.currency, plans: config.billing.plans };
    stripeEvents = new stripe.StripeEvents(db, settings, (level, message, meta) => logger.log(level, message, meta));
  }
  const deployment: ModelProvider = config.models.baseUrl
    ? new OpenAICompatibleProvider(
        { baseUrl: config.models.baseUrl, apiKey: config.models.apiKey, models: modelList, media: config.models.media },
        warn,
      )
    : new DevelopmentProvider();
  const modelPolicy = new ModelPolicyService({ db, audit, cacheMs: config.capabilities.cacheMs });
  const modelConnections = new ModelConnectionService({
    db,
    secrets,
    outbound,
    audit,
    settings: { testTimeoutMs: Math.min(config.models.timeoutMs, 15_000), connectionsPerUser: config.models.connectionsPerUser },
    log: warn,
  });
  const modelCatalogue = new ModelCatalogue({ db, deployment, capabilities, policy: modelPolicy });
  // Integrations and MCP servers: the connections first (MCP servers sign in with them), then the
  // servers, then the catalog and the authorization flow, which list the servers and tell them of a connection.
  const integrationFlows = new OAuthFlows(config.integrations, outbound);
  const integrationConnections = new IntegrationConnectionService({
    db,
    secrets,
    audit,
    flows: integrationFlows,
    timeoutMs: config.integrations.timeoutMs,
    log: warn,
    onRefresh: (outcome) => metrics.integrationRefreshes.inc({ outcome }),
  });
  const observeMcp: McpObserver = (operation, outcome, seconds) => {
    metrics.mcpCalls.observe({ operation, outcome }, seconds);
    if (outcome !== 'ok') metrics.mcpErrors.inc({ operation, outcome });
  };
  const mcpExchanges = new McpExchanges({
    capabilities,
    secrets,
    outbound,
    integrations: integrationConnections,
    maxResponseBytes: config.mcp.maxResponseBytes,
    log: warn,
    observe: observeMcp,
  });
  const mcpServers = new McpServerService({
    db,
    capabilities,
    secrets,
    outbound,
    audit,
    integrations: integrationConnections,
    exchanges: mcpExchanges,
    settings: config.mcp,
    log: warn,
  });
  const mcpTools = new McpToolSource({ db, capabilities, exchanges: mcpExchanges, log: warn, observe: observeMcp });
  const integrations = new IntegrationService({ db, providers: config.integrations.providers, servers: mcpServers });
  const integrationAuthorization = new IntegrationAuthorizationService({
    db,
    capabilities,
    secrets,
    audit,
    flows: integrationFlows,
    catalog: integrations,
    servers: mcpServers,
    settings: config.integrations,
    log: warn,
  });
  const memory = new MemoryService(db, projects);
  // The deployment's default chat model, and its first model of each media kind.
  const firstMedia = (kind: 'image' | 'transcription' | 'speech') => deployment.media?.models.find((m) => m.kind === kind)?.id;
  const defaultModels = {
    chat: findModel(deployment)?.id,
    image: firstMedia('image'),
    transcription: firstMedia('transcription'),
    speech: firstMedia('speech'),
  };
  // Settings check a chosen model against the catalogue; the models' defaults come from the settings.
  const settings = new SettingsService({ db, catalog: modelCatalogue, defaults: { ...BUILT_IN_DEFAULTS, models: defaultModels } });
  const models = new ModelService({
    deployment,
    catalogue: modelCatalogue,
    connections: modelConnections,
    defaults: settings,
    outbound,
    settings: { callTimeoutMs: config.models.timeoutMs, mediaTimeoutMs: config.media.timeoutMs },
    log: warn,
  });
  const knowledge = new KnowledgeService({
    db,
    capabilities,
    projects,
    embedder,
    // Users who chose an embeddings model of their own connection: their knowledge is embedded through it.
    userEmbeddings: {
      models,
      connections: modelConnections,
      settings,
      billing,
      timeoutMs: config.models.timeoutMs,
      queryTimeoutMs,
      backoff: { baseMs: config.embeddings.indexIntervalMs, maxMs: config.embeddings.indexMaxBackoffMs },
    },
    vectorAvailable,
    log: (level, message, meta) => logger.log(level, message, meta),
  });
  // The conversations come before files (which check them); chat's turns after the tools, whose
  // built-ins act through files.
  const conversations = new ConversationService({ db, projects, models, skills });
  const files = new FileService({
    db,
    store,
    signedUrls,
    projects,
    limits: { maxUploadBytes: config.storage.maxUploadBytes, ingestMaxBytes: config.ingestMaxBytes },
    warn,
    entitlements: billing,
    conversations,
  });
  const principals = new PrincipalService(db, audit);
  const notes = new NoteService(db, projects);
  const automations = new AutomationService({ db, models, projects, skills, runTimeoutMs: config.automations.runTimeoutMs, billing });
  const tools = new ToolService({
    builtins: new BuiltinTools({ knowledge, memory, notes, files, projects, automations, policies: config.tools.builtinPolicies }),
    // The caller's MCP servers' tools, beside the built-in ones.
    sources: [mcpTools],
    settings,
    limits: { timeoutMs: config.tools.callTimeoutMs, maxResultBytes: config.tools.maxResultBytes },
    log: warn,
  });
  const chat = createChat({
    db,
    notifications: database.notifications,
    conversations,
    skills,
    files,
    attachmentLimits: {
      imageMaxBytes: config.models.attachmentImageMaxBytes,
      textMaxChars: config.models.attachmentTextMaxChars,
    },
    models,
    projects,
    webhooks,
    tools,
    timeoutMs: config.models.timeoutMs,
    billing,
    lease: { leaseMs: config.models.replyLeaseMs },
    memory,
    knowledge,
    settings,
    warn,
    onGrounded: (outcome, sources) => {
      metrics.groundedTurns.inc({ outcome });
      metrics.groundingSources.inc(sources);
    },
    toolSettings: { enabled: config.tools.enabled, maxSteps: config.tools.maxSteps, approvalTtlMs: config.tools.approvalTtlMs },
    audit,
    observer: {
      firstToken: (seconds) => metrics.firstToken.observe(seconds),
      approvalWait: (seconds, decision) => metrics.approvalWait.observe({ decision }, seconds),
      toolCall: (tool, outcome) => metrics.toolCalls.inc({ tool, outcome }),
    },
  });
  const onboarding = new OnboardingService({ db, steps: config.shell.onboardingSteps, projects, files, settings });
  const outputs = new OutputService({ db, store, maxBytes: config.storage.maxOutputBytes, warn, entitlements: billing });
  const media = new MediaService({
    db,
    models,
    outputs,
    files,
    notes,
    projects,
    conversations,
    billing,
    webhooks,
    settings: config.media,
    log: warn,
  });
  const doors = createDoors({ config, db, doc, audit, principals, models, billing, embedder, outbound, tools, notes, files, skills, warn });
  return {
    ...doors,
    ...createTeams({ config, db, audit, principals, files, projects, skills, deployment }),
    knowledge,
    files,
    outputs,
    media,
    audit,
    principals,
    quotas,
    usage: new UsageService(billing, quotas),
    budgets: new BudgetService(db, audit),
    billing,
    stripeEvents,
    sessions: new SessionService(db, { idleMs: config.auth.sessionIdleMs, absoluteMs: config.auth.sessionAbsoluteMs }),
    capabilities,
    projects,
    notes,
    memory,
    skills,
    webhooks,
    conversations,
    feedback: new FeedbackService({ db, conversations, webhooks }),
    chat,
    automations,
    agents: new AgentEnvironmentService(db, config.agents),
    models,
    modelConnections,
    modelPolicy,
    mcpServers,
    mcpTools,
    integrations,
    integrationAuthorization,
    integrationConnections,
    settings,
    tools,
    onboarding,
    bootstrap: new BootstrapService({
      principals,
      capabilities,
      settings,
      catalog: modelCatalogue,
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
