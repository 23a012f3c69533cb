import type { FailureLog } from '../../platform/ai/models';
import type { Outbound } from '../../platform/net/outbound';
import type { SealedColumn, Secrets } from '../../platform/secrets';
import type { CapabilityService } from '../capabilities/service';
import { type IntegrationAccess, IntegrationUnavailable, MCP_PREFIX } from '../integrations/service';
import {
  type ListedTool,
  McpConnector,
  McpFailure,
  type McpOutcome,
  type McpTarget,
  type McpTransportKind,
  type RawToolResult,
} from './client';
import type * as repo from './repository';

/** Metrics of each exchange: what it was, how it ended, and how long it took. */
export type McpObserver = (operation: 'list_tools' | 'call_tool', outcome: McpOutcome, seconds: number) => void;

/** The integration whose connection an `oauth` server signs in with: a configured provider, or its own (`mcp:<id>`). */
export const integrationIdOf = (row: Pick<repo.ServerRow, 'id' | 'authentication' | 'integration_id'>): string | null =>
  row.authentication === 'oauth' ? (row.integration_id ?? `${MCP_PREFIX}${row.id}`) : null;

/** What a server's credentials are sealed for. */
export const credentialsContext = (serverId: string) => `mcp-server-credentials:${serverId}`;

/** The column holding sealed credentials, for key rotation. */
export const sealedColumns: SealedColumn[] = [{ table: 'mcp_servers', idColumn: 'id', column: 'credentials', context: credentialsContext }];

/** The headers that carry the credentials (or an `oauth` connection's access token). */
export function headersFor(authentication: string, headerName: string | null, secret: string | null): Record<string, string> {
  if (secret === null) return {};
  if (authentication === 'bearer' || authentication === 'oauth') return { authorization: `Bearer ${secret}` };
  if (authentication === 'header' && headerName) return { [headerName.toLowerCase()]: secret };
  return {};
}

export interface McpExchangeDeps {
  capabilities: Pick<CapabilityService, 'isEnabled'>;
  secrets: Secrets;
  /** The guard every request to a server goes through. */
  outbound: Outbound;
  /** The connections `oauth` servers sign in with; without it such servers cannot be reached. */
  integrations?: Pick<IntegrationAccess, 'accessToken' | 'providerName'>;
  /** The most bytes one answer of a server may have. */
  maxResponseBytes: number;
  /** Where failed catalog reads are logged (never with the credentials or the address). */
  log?: FailureLog;
  observe?: McpObserver;
}

/**
 * Exchanges with users' servers, signed in: with a server's credentials, or with the access
 * token of the connection it signs in with (refreshed once when the server refuses it). Each
 * exchange is one short session (see McpConnector).
 */
export class McpExchanges {
  private readonly capabilities: Pick<CapabilityService, 'isEnabled'>;
  private readonly secrets: Secrets;
  private readonly integrations: McpExchangeDeps['integrations'];
  private readonly connector: McpConnector;
  private readonly log: FailureLog;
  private readonly observe: McpObserver;

  constructor({
    capabilities,
    secrets,
    outbound,
    integrations,
    maxResponseBytes,
    log = () => undefined,
    observe = () => undefined,
  }: McpExchangeDeps) {
    this.capabilities = capabilities;
    this.secrets = secrets;
    this.integrations = integrations;
    this.connector = new McpConnector(outbound, { maxResponseBytes });
    this.log = log;
    this.observe = observe;
  }

  /** Reads a stored server's catalog, signed in. */
  listTools(row: repo.ServerRow): Promise<ListedTool[]> {
    return this.signedIn(row, (target, secret) => this.list(target, secret, { serverId: row.id }));
  }

  /** Calls one tool of a stored server, signed in; the answer as the server gave it. */
  callTool(row: repo.ServerRow, toolName: string, args: Record<string, unknown>, signal: AbortSignal): Promise<RawToolResult> {
    return this.signedIn(row, (target, secret) => this.connector.callTool(target, secret, toolName, args, signal));
  }

  /** Reads the catalog at `target` with `secret` (a draft's, or a stored server's signed in); a failure is logged with `serverId`. */
  async list(target: McpTarget, secret: string | null, context: { serverId: string | null }): Promise<ListedTool[]> {
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

  /** The connection's access token; `rejected`: the one the server just refused, which is refreshed. */
  async oauthToken(userId: string, integrationId: string, serverName: string, rejected?: string): Promise<string> {
    if (!this.integrations) throw new IntegrationUnavailable('Integrations are not available in this deployment.');
    if (!(await this.capabilities.isEnabled('integrations')))
      throw new IntegrationUnavailable('Integrations are disabled for this deployment, so this MCP server cannot sign in.');
    const name = integrationId.startsWith(MCP_PREFIX) ? serverName : (this.integrations.providerName(integrationId) ?? integrationId);
    return this.integrations.accessToken(userId, integrationId, name, rejected);
  }

  /** What authenticates requests to the server: its credentials, or its connection's access token (refreshed if due). */
  private async secretOf(row: repo.ServerRow): Promise<string | null> {
    const integrationId = integrationIdOf(row);
    if (integrationId !== null) return this.oauthToken(row.owner_user_id, integrationId, row.name);
    return row.credentials === null ? null : this.secrets.open(row.credentials, credentialsContext(row.id));
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
}
