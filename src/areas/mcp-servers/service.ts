import type { RequestInput } from '../../platform/api-types';
import type { FailureLog } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { Outbound } from '../../platform/net/outbound';
import type { PageRequest } from '../../platform/pagination';
import type { Secrets } from '../../platform/secrets';
import type { Actor, AuditService } from '../audit/service';
import type { CapabilityService } from '../capabilities/service';
import {
  type IntegrationAccess,
  IntegrationUnavailable,
  MCP_PREFIX,
  NotConnected,
  type OAuthServer,
  type OAuthServers,
} from '../integrations/service';
import { catalogOf, DEFAULT_TOOL_POLICY, type PolicedTool, policed, policiesOf } from './catalog';
import { McpFailure, type McpTarget, type McpTransportKind } from './client';
import { credentialsContext, headersFor, integrationIdOf, type McpExchanges } from './exchanges';
import { prefixFrom, uniquePrefix } from './names';
import { checkReach, draftReach, type Reach } from './reach';
import * as repo from './repository';

type CreateInput = RequestInput<'McpServerCreateRequest'>;
type UpdateInput = RequestInput<'McpServerUpdateRequest'>;

export interface McpServerSettings {
  /** Servers per user. */
  serversPerUser: number;
}

export const SERVER_CREATE_ACTION = 'mcp_server.create';
export const SERVER_UPDATE_ACTION = 'mcp_server.update';
export const SERVER_DELETE_ACTION = 'mcp_server.delete';

export const DEFAULT_TIMEOUT_MS = 30_000;

const NOT_FOUND = 'MCP server not found.';

export interface McpServerServiceDeps {
  db: Database;
  capabilities: Pick<CapabilityService, 'isEnabled'>;
  secrets: Secrets;
  /** The guard of every URL a user gives. */
  outbound: Outbound;
  audit: AuditService;
  /** The connections `oauth` servers sign in with; without it such servers cannot be reached. */
  integrations?: Pick<IntegrationAccess, 'hasProvider' | 'forget'>;
  /** The exchanges with the servers, signed in. */
  exchanges: Pick<McpExchanges, 'listTools' | 'list' | 'oauthToken'>;
  settings: McpServerSettings;
  /** Where catalogs that could not be read after a connection are logged. */
  log?: FailureLog;
  now?: () => number;
}

/**
 * Users' MCP servers: their CRUD, reading their tool catalogs (on create, enable, refresh, and a
 * draft's test), and the servers that sign in with their own authorization server, for the
 * integrations area. Their tools, as a tool source of chat, are `McpToolSource`'s.
 */
export class McpServerService implements OAuthServers {
  private readonly db: Database;
  private readonly integrations: McpServerServiceDeps['integrations'];
  private readonly capabilities: Pick<CapabilityService, 'isEnabled'>;
  private readonly secrets: Secrets;
  private readonly outbound: Outbound;
  private readonly audit: AuditService;
  private readonly exchanges: McpServerServiceDeps['exchanges'];
  private readonly settings: McpServerSettings;
  private readonly log: FailureLog;
  private readonly now: () => number;

  constructor({
    db,
    capabilities,
    secrets,
    outbound,
    audit,
    integrations,
    exchanges,
    settings,
    log = () => undefined,
    now = Date.now,
  }: McpServerServiceDeps) {
    this.db = db;
    this.integrations = integrations;
    this.capabilities = capabilities;
    this.secrets = secrets;
    this.outbound = outbound;
    this.audit = audit;
    this.exchanges = exchanges;
    this.settings = settings;
    this.log = log;
    this.now = now;
  }

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
        secret = await this.exchanges.oauthToken(userId, reach.integrationId, input.name);
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
      const listed = await this.exchanges.list(target, secret, { serverId: null });
      const tools = policed(catalogOf(prefix, listed), input.defaultToolPolicy ?? DEFAULT_TOOL_POLICY, input.toolPolicies ?? {});
      return { ok: true, tools, error: null, testedAt };
    } catch (failure) {
      if (!(failure instanceof McpFailure)) throw failure;
      return { ok: false, tools: [], error: failure.message, testedAt };
    }
  }

  // The servers that sign in with their own authorization server (OAuthServers, for the integrations area).

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

  /** Reads a stored server's catalog and stores the outcome (a failure keeps the tools found before). */
  private async readCatalog(row: repo.ServerRow): Promise<repo.ServerRow> {
    let changes: Parameters<typeof repo.updateServer>[3];
    try {
      const listed = await this.exchanges.listTools(row);
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

  /** `400` naming the field unless the fields of a server's reach are consistent and its URL allowed. */
  private checkReach(reach: Parameters<typeof checkReach>[0]): Promise<Reach> {
    return checkReach(reach, { outbound: this.outbound, hasProvider: (id) => this.integrations?.hasProvider(id) ?? false });
  }
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
