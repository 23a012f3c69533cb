import { validateHeaderValue } from 'node:http';
import type { RequestInput } from '../../platform/api-types';
import type { FailureLog } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import { type ErrorDetail, errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { Outbound } from '../../platform/net/outbound';
import type { PageRequest } from '../../platform/pagination';
import type { SealedColumn, Secrets } from '../../platform/secrets';
import type { Actor, AuditService } from '../audit/service';
import type { CapabilityService } from '../capabilities/service';
import {
  IntegrationUnavailable,
  type IntegrationService,
  MCP_PREFIX,
  NotConnected,
  type OAuthServer,
  type OAuthServers,
} from '../integrations/service';
import {
  type ListedTool,
  McpConnector,
  McpFailure,
  type McpOutcome,
  type McpTarget,
  type McpTransportKind,
  type RawToolResult,
} from './client';
import { namespacedName, prefixFrom, prefixOf, uniquePrefix } from './names';
import * as repo from './repository';

type CreateInput = RequestInput<'McpServerCreateRequest'>;

/** How a create (or test) request's draft would reach its server, before it is checked. */
const draftReach = (input: CreateInput): Reach => ({
  url: input.url,
  transport: input.transport,
  authentication: input.authentication ?? 'none',
  headerName: input.headerName ?? null,
  credentials: input.credentials ?? null,
  hasCredentials: input.credentials !== undefined,
  integrationId: input.integrationId ?? null,
});
type UpdateInput = RequestInput<'McpServerUpdateRequest'>;

// ---- the tool-source interface (the same shapes as the tools area declares) ----

export type ToolPolicy = 'allow' | 'approval_required' | 'deny';

/** A tool a model may be offered. */
export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  source: { type: 'builtin' } | { type: 'mcp'; serverId: string; serverName: string };
  policy: ToolPolicy;
}

/** What a tool call gave: its output for the model, whether it is an error, whether it was cut, and whether its server is unavailable. */
export interface ToolCallResult {
  output: string;
  isError: boolean;
  /** The answer was cut here: its output past the caller's cap, or the whole answer past the transport's. */
  truncated?: true;
  unavailable?: UnavailableServer;
}

/** A server whose tools are left out, and why (for the reply to say so). */
export interface UnavailableServer {
  serverId: string;
  serverName: string;
  reason: string;
}

// ---- the area ----

/** A tool of a server's catalog, as stored. */
export interface CatalogTool extends ListedTool {
  namespacedName: string;
}

/** A catalog tool with its effective policy. */
export interface PolicedTool extends CatalogTool {
  policy: ToolPolicy;
}

export interface McpServerSettings {
  /** Servers per user. */
  serversPerUser: number;
  /** The most bytes one answer of a server may have. */
  maxResponseBytes: number;
}

/** Metrics of each exchange: what it was, how it ended, and how long it took. */
export type McpObserver = (operation: 'list_tools' | 'call_tool', outcome: McpOutcome, seconds: number) => void;

export const SERVER_CREATE_ACTION = 'mcp_server.create';
export const SERVER_UPDATE_ACTION = 'mcp_server.update';
export const SERVER_DELETE_ACTION = 'mcp_server.delete';

export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_TOOL_POLICY: ToolPolicy = 'approval_required';

/** The integration whose connection an `oauth` server signs in with: a configured provider, or its own (`mcp:<id>`). */
export const integrationIdOf = (row: Pick<repo.ServerRow, 'id' | 'authentication' | 'integration_id'>): string | null =>
  row.authentication === 'oauth' ? (row.integration_id ?? `${MCP_PREFIX}${row.id}`) : null;

/** What a server's credentials are sealed for. */
export const credentialsContext = (serverId: string) => `mcp-server-credentials:${serverId}`;

/** The column holding sealed credentials, for key rotation. */
export const sealedColumns: SealedColumn[] = [{ table: 'mcp_servers', idColumn: 'id', column: 'credentials', context: credentialsContext }];

const NOT_FOUND = 'MCP server not found.';

/** How a call fails when its server is down (rather than the call itself: too large an answer, a JSON-RPC error, a cancelled turn). */
const SERVER_DOWN: ReadonlySet<McpOutcome> = new Set(['timeout', 'unreachable', 'http_error', 'not_allowed']);

/** Headers the transports set themselves (or that would change how the exchange is framed). */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'accept',
  'accept-encoding',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'last-event-id',
  'mcp-session-id',
  'mcp-protocol-version',
]);

export const toolsOf = (row: Pick<repo.ServerRow, 'tools'>): CatalogTool[] => (row.tools as unknown as CatalogTool[] | null) ?? [];
export const policiesOf = (row: Pick<repo.ServerRow, 'tool_policies'>): Record<string, ToolPolicy> =>
  (row.tool_policies as unknown as Record<string, ToolPolicy> | null) ?? {};

/** The catalog's tools with the policies of the server (stored, or a draft's). */
export function policed(tools: CatalogTool[], defaultPolicy: ToolPolicy, policies: Record<string, ToolPolicy>): PolicedTool[] {
  return tools.map((tool) => ({ ...tool, policy: policies[tool.name] ?? defaultPolicy }));
}

export interface McpServerServiceDeps {
  db: Database;
  capabilities: Pick<CapabilityService, 'isEnabled'>;
  secrets: Secrets;
  /** The guard every request to a server goes through. */
  outbound: Outbound;
  audit: AuditService;
  /** The connections `oauth` servers sign in with; without it such servers cannot be reached. */
  integrations?: Pick<IntegrationService, 'accessToken' | 'hasProvider' | 'providerName' | 'forget'>;
  settings: McpServerSettings;
  /** Where failed exchanges are logged (never with the credentials or the address). */
  log?: FailureLog;
  observe?: McpObserver;
  now?: () => number;
}

/** The state a server's fields must be consistent in (a create, or an update merged with the row). */
interface Reach {
  url: string;
  transport: McpTransportKind;
  authentication: string;
  headerName: string | null;
  /** Credentials in clear: new ones, or null when there are none (or they are stored unchanged). */
  credentials: string | null;
  hasCredentials: boolean;
  /** With `oauth`: the configured provider whose connection it uses; null: its own authorization server. */
  integrationId: string | null;
}

/**
 * Users' MCP servers: their CRUD, reading their tool catalogs (on create, enable, refresh, and a
 * draft's test), and, as a tool source of chat, their tools with the effective policies and the
 * calls of those tools. Each exchange with a server is one short session (see McpConnector).
 */
export class McpServerService implements OAuthServers {
  private readonly db: Database;
  private readonly integrations: McpServerServiceDeps['integrations'];
  private readonly capabilities: Pick<CapabilityService, 'isEnabled'>;
  private readonly secrets: Secrets;
  private readonly outbound: Outbound;
  private readonly audit: AuditService;
  private readonly settings: McpServerSettings;
  private readonly connector: McpConnector;
  private readonly log: FailureLog;
  private readonly observe: McpObserver;
  private readonly now: () => number;

  constructor({
    db,
    capabilities,
    secrets,
    outbound,
    audit,
    integrations,
    settings,
    log = () => undefined,
    observe = () => undefined,
    now = Date.now,
  }: McpServerServiceDeps) {
    this.db = db;
    this.integrations = integrations;
    this.capabilities = capabilities;
    this.secrets = secrets;
    this.outbound = outbound;
    this.audit = audit;
    this.settings = settings;
    this.connector = new McpConnector(outbound, { maxResponseBytes: settings.maxResponseBytes });
    this.log = log;
    this.observe = observe;
    this.now = now;
  }

  // ---- the caller's servers ----

  async server(userId: string, serverId: string): Promise<repo.ServerRow> {
    const row = await repo.findServer(this.db, userId, serverId);
    if (!row) throw errors.notFound(NOT_FOUND);
    return row;
  }

  servers(userId: string, page: PageRequest) {
    return repo.serverList.page(this.db, { ownerUserId: userId }, page);
  }

  async createServer(actor: Actor, input: CreateInput): Promise<repo.ServerRow> {
    const reach = await this.checkReach(draftReach(input));
    const now = new Date(this.now());
    const id = uuidv7(now.getTime());
    const created = await this.db.transaction().execute(async (trx) => {
      // Serialized per user, so that concurrent creates can pass neither the limit nor take one prefix twice.
      await lockForTransaction(trx, `mcp-servers:${actor.userId}`);
      const limit = this.settings.serversPerUser;
      if ((await repo.countServers(trx, actor.userId)) >= limit) {
        throw errors.conflict(`You already have ${limit} MCP servers, the most a user may have.`);
      }
      const row = await repo.insertServer(trx, {
        id,
        owner_user_id: actor.userId,
        name: input.name,
        tool_prefix: uniquePrefix(prefixFrom(input.name), await repo.prefixes(trx, actor.userId)),
        url: reach.url,
        transport: reach.transport,
        authentication: reach.authentication,
        header_name: reach.headerName,
        credentials: reach.credentials === null ? null : this.secrets.seal(reach.credentials, credentialsContext(id)),
        integration_id: reach.integrationId,
        enabled: input.enabled ?? true,
        timeout_ms: input.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        default_tool_policy: input.defaultToolPolicy ?? DEFAULT_TOOL_POLICY,
        tool_policies: JSON.stringify(input.toolPolicies ?? {}),
        created_at: now,
        updated_at: now,
      });
      await this.audit.record(
        actor,
        { action: SERVER_CREATE_ACTION, resourceType: 'mcp_server', resourceId: id, outcome: 'success', metadata: auditMetadata(row) },
        trx,
      );
      return row;
    });
    return created.enabled ? this.readCatalog(created) : created;
  }

  async updateServer(actor: Actor, input: UpdateInput): Promise<repo.ServerRow> {
    const current = await this.server(actor.userId, input.serverId);
    const authentication = input.authentication ?? current.authentication;
    // Credentials and a header name belong to the authentication that uses them (as an integration to oauth).
    const keepsCredentials = (authentication === 'bearer' || authentication === 'header') && input.credentials !== null;
    const integrationId =
      authentication !== 'oauth'
        ? (input.integrationId ?? null)
        : input.integrationId !== undefined
          ? input.integrationId
          : current.integration_id;
    const reachFields = ['url', 'transport', 'authentication', 'headerName', 'credentials', 'integrationId'] as const;
    const reachChanged = reachFields.some((field) => input[field] !== undefined);
    const reach = await this.checkReach({
      url: input.url ?? current.url,
      transport: (input.transport ?? current.transport) as McpTransportKind,
      authentication,
      headerName: input.headerName !== undefined ? input.headerName : authentication === 'header' ? current.header_name : null,
      credentials: typeof input.credentials === 'string' ? input.credentials : null,
      hasCredentials:
        typeof input.credentials === 'string' || (keepsCredentials && input.credentials === undefined && current.credentials !== null),
      integrationId,
      // Only a new URL is resolved again (a stored one is checked on every request anyway).
      urlChanged: input.url !== undefined,
      given: new Set(Object.keys(input)),
    });
    // Its own authorization server's token was issued for the old URL (the resource): with a new URL
    // or another way of signing in, the connection is forgotten (revoked where possible) with the
    // authorizations under way, before anything is sent to the new address.
    const ownConnection = current.authentication === 'oauth' && current.integration_id === null;
    const stillOwn = reach.authentication === 'oauth' && reach.integrationId === null;
    if (ownConnection && (!stillOwn || (input.url !== undefined && input.url !== current.url))) {
      await this.integrations?.forget(actor, `${MCP_PREFIX}${current.id}`);
    }
    const enabling = input.enabled === true && !current.enabled;
    const updated = await this.db.transaction().execute(async (trx) => {
      const row = await repo.updateServer(trx, actor.userId, input.serverId, {
        name: input.name,
        url: input.url,
        transport: input.transport,
        authentication: input.authentication,
        header_name: reach.headerName,
        credentials:
          typeof input.credentials === 'string'
            ? this.secrets.seal(input.credentials, credentialsContext(input.serverId))
            : !keepsCredentials
              ? null
              : undefined,
        integration_id: authentication === 'oauth' ? integrationId : null,
        enabled: input.enabled,
        timeout_ms: input.timeoutMs,
        default_tool_policy: input.defaultToolPolicy,
        tool_policies: input.toolPolicies === undefined ? undefined : JSON.stringify(input.toolPolicies),
        // Another address or other credentials have not been tried yet.
        ...(reachChanged ? { status: 'untested', last_error: null } : {}),
        updated_at: new Date(this.now()),
      });
      if (!row) throw errors.notFound(NOT_FOUND);
      const changed = Object.keys(input).filter((name) => name !== 'serverId');
      await this.audit.record(
        actor,
        {
          action: SERVER_UPDATE_ACTION,
          resourceType: 'mcp_server',
          resourceId: row.id,
          outcome: 'success',
          metadata: { ...auditMetadata(row), changed },
        },
        trx,
      );
      return row;
    });
    return updated.enabled && (enabling || reachChanged) ? this.readCatalog(updated) : updated;
  }

  async deleteServer(actor: Actor, serverId: string): Promise<void> {
    const current = await this.server(actor.userId, serverId);
    // Its own authorization server's connection goes with it: revoked first where the server can.
    if (current.authentication === 'oauth' && current.integration_id === null)
      await this.integrations?.forget(actor, `${MCP_PREFIX}${serverId}`);
    await this.db.transaction().execute(async (trx) => {
      const row = await repo.findServer(trx, actor.userId, serverId);
      if (!row || !(await repo.deleteServer(trx, actor.userId, serverId))) throw errors.notFound(NOT_FOUND);
      await this.audit.record(
        actor,
        {
          action: SERVER_DELETE_ACTION,
          resourceType: 'mcp_server',
          resourceId: serverId,
          outcome: 'success',
          metadata: auditMetadata(row),
        },
        trx,
      );
    });
  }

  /** Reads the caller's server's catalog again, storing the outcome. */
  async refresh(userId: string, serverId: string): Promise<repo.ServerRow> {
    return this.readCatalog(await this.server(userId, serverId));
  }

  /** Reads a draft's catalog (checked as a create), storing nothing. */
  async test(userId: string, input: CreateInput): Promise<{ ok: boolean; tools: PolicedTool[]; error: string | null; testedAt: Date }> {
    const reach = await this.checkReach(draftReach(input));
    const testedAt = new Date(this.now());
    let secret = reach.credentials;
    if (reach.authentication === 'oauth') {
      // A draft signs in with a configured provider's connection; its own authorization server is connected once it is saved.
      if (reach.integrationId === null) {
        return {
          ok: false,
          tools: [],
          error:
            'A server that signs in with its own authorization server is connected once saved (POST /api/v1/integrations/connect), then read.',
          testedAt,
        };
      }
      try {
        secret = await this.oauthToken(userId, reach.integrationId, input.name);
      } catch (error) {
        if (error instanceof NotConnected || error instanceof IntegrationUnavailable)
          return { ok: false, tools: [], error: error.message, testedAt };
        throw error;
      }
    }
    const target: McpTarget = {
      url: reach.url,
      transport: reach.transport,
      headers: headersFor(reach.authentication, reach.headerName, secret),
      timeoutMs: input.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    };
    const prefix = prefixFrom(input.name);
    try {
      const listed = await this.list(target, secret, { serverId: null });
      const tools = policed(catalogOf(prefix, listed), input.defaultToolPolicy ?? DEFAULT_TOOL_POLICY, input.toolPolicies ?? {});
      return { ok: true, tools, error: null, testedAt };
    } catch (failure) {
      if (!(failure instanceof McpFailure)) throw failure;
      return { ok: false, tools: [], error: failure.message, testedAt };
    }
  }

  // ---- the tool source ----

  /** The enabled servers' tools with their effective policies; servers in error (or all, with `mcp` off) are unavailable. */
  async listTools(userId: string): Promise<{ tools: ToolDefinition[]; unavailable: UnavailableServer[] }> {
    const rows = await repo.enabledServers(this.db, userId);
    if (rows.length === 0) return { tools: [], unavailable: [] };
    if (!(await this.capabilities.isEnabled('mcp'))) {
      return {
        tools: [],
        unavailable: rows.map((row) => ({
          serverId: row.id,
          serverName: row.name,
          reason: 'MCP servers are disabled for this deployment.',
        })),
      };
    }
    const tools: ToolDefinition[] = [];
    const unavailable: UnavailableServer[] = [];
    for (const row of rows) {
      if (row.status !== 'active') {
        unavailable.push({ serverId: row.id, serverName: row.name, reason: row.last_error ?? 'Its tool catalog has not been read yet.' });
        continue;
      }
      for (const tool of policed(toolsOf(row), row.default_tool_policy as ToolPolicy, policiesOf(row))) {
        tools.push({
          name: tool.namespacedName,
          description: tool.description,
          inputSchema: tool.inputSchema,
          source: { type: 'mcp', serverId: row.id, serverName: row.name },
          policy: tool.policy,
        });
      }
    }
    return { tools, unavailable };
  }

  /**
   * Calls the tool `name` (a namespaced name of one of the user's servers) with the SDK. Never
   * throws for the server's sake: an unknown or denied tool, a server off or failing, a timeout or
   * an answer past the transport's cap are error results (the last `truncated`); output past
   * `maxResultBytes` is cut, and `truncated`.
   */
  async callTool(
    userId: string,
    name: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; maxResultBytes: number },
  ): Promise<ToolCallResult> {
    const prefix = prefixOf(name);
    const row = prefix === null ? undefined : await repo.findServerByPrefix(this.db, userId, prefix);
    const tool = row ? toolsOf(row).find((t) => t.namespacedName === name) : undefined;
    const refuse = (output: string): ToolCallResult => ({ output, isError: true });
    if (!row || !tool) return refuse(`There is no tool named ${name}.`);
    if (!(await this.capabilities.isEnabled('mcp'))) return refuse('MCP servers are disabled for this deployment.');
    if (!row.enabled) return refuse(`The MCP server "${row.name}" is disabled.`);
    if ((policiesOf(row)[tool.name] ?? row.default_tool_policy) === 'deny') return refuse(`The tool ${name} is denied by its policy.`);
    const started = performance.now();
    try {
      const raw = await this.signedIn(row, (target, secret) => this.connector.callTool(target, secret, tool.name, args, options.signal));
      const result = toResult(raw, options.maxResultBytes);
      this.observe('call_tool', result.isError ? 'tool_error' : 'ok', (performance.now() - started) / 1000);
      return result;
    } catch (failure) {
      // A connection that is missing, expired or cannot be refreshed now: the model is told to have the user connect.
      if (failure instanceof NotConnected || failure instanceof IntegrationUnavailable) return refuse(failure.message);
      const known =
        failure instanceof McpFailure ? failure : new McpFailure('protocol', "The MCP server's answer could not be read.", String(failure));
      this.observe('call_tool', known.outcome, (performance.now() - started) / 1000);
      this.log('MCP tool call failed', {
        serverId: row.id,
        tool: tool.name,
        outcome: known.outcome,
        error: known.message,
        detail: known.detail,
      });
      // An answer past the transport's cap was cut while it was read: nothing of it is kept.
      if (known.outcome === 'too_large') return { ...refuse(known.message), truncated: true };
      // A server that cannot be reached (or answers HTTP errors) is left out for the rest of the turn.
      if (!SERVER_DOWN.has(known.outcome)) return refuse(known.message);
      return { output: known.message, isError: true, unavailable: { serverId: row.id, serverName: row.name, reason: known.message } };
    }
  }

  // ---- servers that sign in with an integration (OAuthServers, for the integrations area) ----

  async oauthServer(userId: string, serverId: string): Promise<OAuthServer | null> {
    const row = await repo.findServer(this.db, userId, serverId);
    return row && row.authentication === 'oauth' && row.integration_id === null ? { serverId: row.id, name: row.name, url: row.url } : null;
  }

  async oauthServers(userId: string): Promise<OAuthServer[]> {
    const rows = await repo.ownAuthorizationServers(this.db, userId);
    return rows.map((row) => ({ serverId: row.id, name: row.name, url: row.url }));
  }

  /**
   * A connection was stored: the user's enabled servers that sign in with it read their catalog
   * again, one after the other, each outcome stored on the server (one that fails is logged and
   * does not stop the others).
   */
  async connected(userId: string, integrationId: string): Promise<void> {
    if (!(await this.capabilities.isEnabled('mcp'))) return;
    for (const row of await repo.enabledServers(this.db, userId)) {
      if (integrationIdOf(row) !== integrationId) continue;
      try {
        await this.readCatalog(row);
      } catch (error) {
        this.log('MCP tool catalog could not be read after a connection', { serverId: row.id, error: (error as Error).message });
      }
    }
  }

  // ---- internals ----

  /** What authenticates requests to the server: its credentials, or its connection's access token (refreshed if due). */
  private async secretOf(row: repo.ServerRow): Promise<string | null> {
    const integrationId = integrationIdOf(row);
    if (integrationId !== null) return this.oauthToken(row.owner_user_id, integrationId, row.name);
    return row.credentials === null ? null : this.secrets.open(row.credentials, credentialsContext(row.id));
  }

  /** The connection's access token; `rejected`: the one the server just refused, which is refreshed. */
  private async oauthToken(userId: string, integrationId: string, serverName: string, rejected?: string): Promise<string> {
    if (!this.integrations) throw new IntegrationUnavailable('Integrations are not available in this deployment.');
    if (!(await this.capabilities.isEnabled('integrations')))
      throw new IntegrationUnavailable('Integrations are disabled for this deployment, so this MCP server cannot sign in.');
    const name = integrationId.startsWith(MCP_PREFIX) ? serverName : (this.integrations.providerName(integrationId) ?? integrationId);
    return this.integrations.accessToken(userId, integrationId, name, rejected);
  }

  /**
   * One exchange with the server, with its credentials; an `oauth` server that refuses the access
   * token (401: revoked or expired early at the provider) gets one more exchange with a refreshed
   * one. Throws NotConnected or IntegrationUnavailable when the connection gives no usable token.
   */
  private async signedIn<T>(row: repo.ServerRow, exchange: (target: McpTarget, secret: string | null) => Promise<T>): Promise<T> {
    const targetWith = (secret: string | null): McpTarget => ({
      url: row.url,
      transport: row.transport as McpTransportKind,
      headers: headersFor(row.authentication, row.header_name, secret),
      timeoutMs: row.timeout_ms,
    });
    const integrationId = integrationIdOf(row);
    const secret = await this.secretOf(row);
    try {
      return await exchange(targetWith(secret), secret);
    } catch (failure) {
      if (!(failure instanceof McpFailure && failure.status === 401) || integrationId === null || secret === null) throw failure;
      const refreshed = await this.oauthToken(row.owner_user_id, integrationId, row.name, secret);
      return exchange(targetWith(refreshed), refreshed);
    }
  }

  /** Reads a stored server's catalog and stores the outcome (a failure keeps the tools found before). */
  private async readCatalog(row: repo.ServerRow): Promise<repo.ServerRow> {
    let changes: Parameters<typeof repo.updateServer>[3];
    try {
      const listed = await this.signedIn(row, (target, secret) => this.list(target, secret, { serverId: row.id }));
      changes = {
        tools: JSON.stringify(catalogOf(row.tool_prefix, listed)),
        catalog_refreshed_at: new Date(this.now()),
        status: 'active',
        last_error: null,
      };
    } catch (failure) {
      // A connection that is missing or cannot give a token is an error of the server, naming the route to connect.
      if (!(failure instanceof McpFailure || failure instanceof NotConnected || failure instanceof IntegrationUnavailable)) throw failure;
      changes = { status: 'error', last_error: failure.message };
    }
    const updated = await repo.updateServer(this.db, row.owner_user_id, row.id, changes);
    if (!updated) throw errors.notFound(NOT_FOUND);
    return updated;
  }

  private async list(target: McpTarget, secret: string | null, context: { serverId: string | null }): Promise<ListedTool[]> {
    const started = performance.now();
    try {
      const tools = await this.connector.listTools(target, secret);
      this.observe('list_tools', 'ok', (performance.now() - started) / 1000);
      return tools;
    } catch (failure) {
      if (failure instanceof McpFailure) {
        this.observe('list_tools', failure.outcome, (performance.now() - started) / 1000);
        this.log('MCP tool catalog could not be read', {
          serverId: context.serverId,
          outcome: failure.outcome,
          error: failure.message,
          detail: failure.detail,
        });
      }
      throw failure;
    }
  }

  /** `400` naming the field unless the fields of a server's reach are consistent and its URL allowed. */
  private async checkReach(reach: Reach & { urlChanged?: boolean; given?: Set<string> }): Promise<Reach> {
    const details: ErrorDetail[] = [];
    const { authentication, headerName, integrationId } = reach;
    if (integrationId !== null && (reach.given === undefined || reach.given.has('integrationId') || reach.given.has('authentication'))) {
      if (authentication !== 'oauth') details.push({ path: '/body/integrationId', message: 'is only allowed with authentication oauth' });
      else if (!this.integrations?.hasProvider(integrationId))
        details.push({
          path: '/body/integrationId',
          message: `names no integration this deployment configured (see GET /api/v1/integrations)`,
        });
    }
    if (authentication === 'header') {
      if (headerName === null) details.push({ path: '/body/headerName', message: 'is required with authentication header' });
      else if (RESERVED_HEADERS.has(headerName.toLowerCase()))
        details.push({ path: '/body/headerName', message: `${headerName} is set by the transport itself` });
    } else if (headerName !== null && (reach.given === undefined || reach.given.has('headerName'))) {
      details.push({ path: '/body/headerName', message: 'is only allowed with authentication header' });
    }
    if ((authentication === 'bearer' || authentication === 'header') && !reach.hasCredentials) {
      details.push({ path: '/body/credentials', message: `are required with authentication ${authentication}` });
    }
    if ((authentication === 'none' || authentication === 'oauth') && reach.credentials !== null) {
      details.push({ path: '/body/credentials', message: 'are only allowed with authentication bearer or header' });
    } else if (reach.credentials !== null) {
      const problem = credentialsProblem(reach.credentials);
      if (problem) details.push({ path: '/body/credentials', message: problem });
    }
    if (reach.urlChanged !== false) {
      const refused = await this.outbound.whyRefused(reach.url);
      if (refused) details.push({ path: '/body/url', message: refused });
    }
    if (details.length > 0) throw errors.invalidRequest('The MCP server as given is not valid.', details);
    return {
      ...reach,
      headerName: authentication === 'header' ? headerName : null,
      integrationId: authentication === 'oauth' ? integrationId : null,
    };
  }
}

/**
 * Why credentials cannot be sent as the value of an HTTP header (null: they can). Node's own check
 * refuses CR, LF, the other control characters but tab, and characters past U+00FF; a leading or
 * trailing space or tab would be trimmed on the way, so the server would get other credentials.
 */
function credentialsProblem(credentials: string): string | null {
  try {
    validateHeaderValue('credentials', credentials);
  } catch {
    return 'must be usable as an HTTP header value: no CR, LF or other control character (tab aside), and no character past U+00FF';
  }
  if (/^[\t ]|[\t ]$/.test(credentials)) return 'must not start or end with a space or tab (an HTTP header value loses them)';
  return null;
}

/** The headers that carry the credentials (or an `oauth` connection's access token). */
function headersFor(authentication: string, headerName: string | null, secret: string | null): Record<string, string> {
  if (secret === null) return {};
  if (authentication === 'bearer' || authentication === 'oauth') return { authorization: `Bearer ${secret}` };
  if (authentication === 'header' && headerName) return { [headerName.toLowerCase()]: secret };
  return {};
}

/** The listed tools named for models (a name the server lists twice is kept once). */
function catalogOf(prefix: string, listed: ListedTool[]): CatalogTool[] {
  const seen = new Set<string>();
  const tools: CatalogTool[] = [];
  for (const tool of listed) {
    const name = namespacedName(prefix, tool.name);
    if (seen.has(name)) continue;
    seen.add(name);
    tools.push({ name: tool.name, namespacedName: name, description: tool.description, inputSchema: tool.inputSchema });
  }
  return tools;
}

/**
 * A tool's answer as output for the model: its text content joined, other content summarized
 * (`[image: image/png, 2048 bytes]`), structured content as JSON when there is no content; cut to
 * `maxBytes` (UTF-8) with a note of how much was left out, and then `truncated`.
 */
export function toResult(raw: RawToolResult, maxBytes: number): ToolCallResult {
  const parts: string[] = [];
  if (Array.isArray(raw.content)) {
    for (const item of raw.content as Array<Record<string, unknown>>) parts.push(summarize(item));
  }
  if (parts.length === 0 && raw.structuredContent !== undefined) parts.push(JSON.stringify(raw.structuredContent));
  if (parts.length === 0 && raw.toolResult !== undefined) parts.push(JSON.stringify(raw.toolResult));
  const text = parts.join('\n');
  const result: ToolCallResult = { output: truncate(text, maxBytes), isError: raw.isError === true };
  if (Buffer.byteLength(text) > maxBytes) result.truncated = true;
  return result;
}

function summarize(item: Record<string, unknown>): string {
  const bytesOf = (data: unknown) => (typeof data === 'string' ? Math.floor((data.length * 3) / 4) : 0);
  switch (item.type) {
    case 'text':
      return typeof item.text === 'string' ? item.text : '';
    case 'image':
    case 'audio':
      return `[${item.type}: ${String(item.mimeType ?? 'unknown type')}, ${bytesOf(item.data)} bytes]`;
    case 'resource': {
      const resource = (item.resource ?? {}) as Record<string, unknown>;
      if (typeof resource.text === 'string') return resource.text;
      return `[resource: ${String(resource.uri ?? '')}${resource.mimeType ? `, ${String(resource.mimeType)}` : ''}, ${bytesOf(resource.blob)} bytes]`;
    }
    case 'resource_link':
      return `[resource link: ${String(item.name ?? '')} ${String(item.uri ?? '')}]`;
    default:
      return `[${String(item.type)} content]`;
  }
}

/** The text cut to `maxBytes` of UTF-8 (on a character boundary), with a note saying so. */
export function truncate(text: string, maxBytes: number): string {
  const total = Buffer.byteLength(text);
  if (total <= maxBytes) return text;
  const note = `\n[output truncated: ${total} bytes, only the first part is shown]`;
  const room = Math.max(0, maxBytes - Buffer.byteLength(note));
  const kept = Buffer.from(text)
    .subarray(0, room)
    .toString('utf8')
    .replace(/\uFFFD+$/, '');
  return room === 0
    ? Buffer.from(text)
        .subarray(0, maxBytes)
        .toString('utf8')
        .replace(/\uFFFD+$/, '')
    : `${kept}${note}`;
}

/** What the audit log keeps of a server: never its credentials. */
function auditMetadata(row: repo.ServerRow): Record<string, unknown> {
  return {
    name: row.name,
    url: row.url,
    transport: row.transport,
    authentication: row.authentication,
    headerName: row.header_name,
    hasCredentials: row.credentials !== null,
    integrationId: integrationIdOf(row),
    enabled: row.enabled,
    defaultToolPolicy: row.default_tool_policy,
    toolPolicies: policiesOf(row),
  };
}
