import type { OAuthClientInformationMixed } from '@modelcontextprotocol/sdk/shared/auth.js' with { 'resolution-mode': 'import' };
import type { Database } from '../../platform/db';
import { errors } from '../../platform/errors';
import type { SealedColumn, Secrets } from '../../platform/secrets';
import type { Actor } from '../audit/service';
import type { DiscoveredServer, IntegrationProvider } from './oauth';
import * as repo from './repository';

export type { IntegrationProvider } from './oauth';

/** What the area is configured with (the configuration's `integrations`). */
export interface IntegrationSettings {
  /** The service's public base URL (the redirect URI is `<publicUrl>/integrations/callback`); null: connecting is refused. */
  publicUrl: string | null;
  providers: IntegrationProvider[];
  /** How long an authorization URL can be completed. */
  stateTtlMs: number;
  /** How long one request to an authorization server may take. */
  timeoutMs: number;
}

/** One of the caller's MCP servers that signs in with its own authorization server. */
export interface OAuthServer {
  serverId: string;
  name: string;
  url: string;
}

/**
 * The caller's MCP servers, as this area needs them (the MCP servers area provides them, and in
 * turn uses the caller's connections through `IntegrationAccess`).
 */
export interface OAuthServers {
  /** The caller's server if it authenticates with `oauth` through its own authorization server. */
  oauthServer(userId: string, serverId: string): Promise<OAuthServer | null>;
  /** All of them, oldest first. */
  oauthServers(userId: string): Promise<OAuthServer[]>;
  /** A connection was stored: the caller's servers that use it read their tool catalog again (in the background of the callback). */
  connected(userId: string, integrationId: string): Promise<void>;
}

/** What the MCP servers area uses of the caller's connections (`IntegrationConnectionService` fits). */
export interface IntegrationAccess {
  /** A usable access token of the connection; NotConnected or IntegrationUnavailable when there is none now. */
  accessToken(userId: string, integrationId: string, name: string, rejected?: string): Promise<string>;
  /** Whether the operator configured a provider with this id. */
  hasProvider(integrationId: string): boolean;
  /** The display name of a configured provider, or null. */
  providerName(integrationId: string): string | null;
  /** Forgets the caller's connection to an integration, if any, and the authorizations under way for it. */
  forget(actor: Actor, integrationId: string): Promise<void>;
}

/** An integration as the caller sees it: the catalog entry and their connection, if any. */
export interface IntegrationView {
  integrationId: string;
  kind: 'provider' | 'mcp_server';
  name: string;
  serverId: string | null;
  scopes: string[];
  connection: repo.ConnectionRow | null;
}

/** The connection is missing or cannot be used: the user connects (again). The message names the route. */
export class NotConnected extends Error {
  override name = 'NotConnected';
  constructor(
    readonly integrationId: string,
    readonly reason: 'missing' | 'expired',
    name: string,
  ) {
    super(
      `${reason === 'missing' ? `Not connected to "${name}"` : `The connection to "${name}" has expired`}: connect it with POST /api/v1/integrations/connect {"integrationId":"${integrationId}"} and open the authorizationUrl it returns.`,
    );
  }
}

/** The authorization server could not be reached to refresh the token: try again later. */
export class IntegrationUnavailable extends Error {
  override name = 'IntegrationUnavailable';
}

/** How a callback ended, for the page or redirect that tells the browser. */
export interface CallbackOutcome {
  status: 'connected' | 'failed';
  integrationId: string | null;
  name: string | null;
  /** Machine code: `connected`, `invalid_state`, `expired_state`, `sign_in_required`, `wrong_user`, `access_denied`, `exchange_failed`, `disabled`. */
  code: string;
  message: string;
}

/** The path of the web-app callback route (outside /api/v1). */
export const CALLBACK_PATH = '/integrations/callback';
/** MCP servers' integrations are named `mcp:<serverId>`. */
export const MCP_PREFIX = 'mcp:';

/** What a connection's access token is sealed for. */
export const accessContext = (id: string) => `integration-access-token:${id}`;
export const refreshContext = (id: string) => `integration-refresh-token:${id}`;
const clientContext = (id: string) => `integration-oauth-client:${id}`;
export const verifierContext = (stateHash: string) => `integration-code-verifier:${stateHash}`;
export const pendingClientContext = (stateHash: string) => `integration-authorization-client:${stateHash}`;

/** The columns holding sealed secrets, for key rotation. */
export const sealedColumns: SealedColumn[] = [
  { table: 'integration_connections', idColumn: 'id', column: 'access_token', context: accessContext },
  { table: 'integration_connections', idColumn: 'id', column: 'refresh_token', context: refreshContext },
  { table: 'integration_connections', idColumn: 'id', column: 'oauth_client', context: clientContext },
  { table: 'integration_authorizations', idColumn: 'state_hash', column: 'code_verifier', context: verifierContext },
  { table: 'integration_authorizations', idColumn: 'state_hash', column: 'oauth_client', context: pendingClientContext },
];

/** Seals the client registered with an MCP server's authorization server, as a connection keeps it. */
export const sealClient = (secrets: Secrets, connectionId: string, client: OAuthClientInformationMixed): string =>
  secrets.seal(JSON.stringify(client), clientContext(connectionId));

/** The client a connection registered with an MCP server's authorization server, or null. */
export function clientOf(secrets: Secrets, row: repo.ConnectionRow): OAuthClientInformationMixed | null {
  return row.oauth_client === null
    ? null
    : (JSON.parse(secrets.open(row.oauth_client, clientContext(row.id))) as OAuthClientInformationMixed);
}

const NOT_FOUND = 'Integration not found.';

export interface IntegrationServiceDeps {
  db: Database;
  /** The operator's providers, in the configured order. */
  providers: IntegrationProvider[];
  servers: Pick<OAuthServers, 'oauthServer' | 'oauthServers'>;
  now?: () => number;
}

/**
 * The integrations a caller can connect: the operator's OAuth providers and the caller's MCP
 * servers that sign in with their own authorization server, each with the caller's connection.
 * Connecting is `IntegrationAuthorizationService`'s; using and removing a connection is
 * `IntegrationConnectionService`'s.
 */
export class IntegrationService {
  private readonly db: Database;
  private readonly providers: IntegrationProvider[];
  private readonly byId: Map<string, IntegrationProvider>;
  private readonly servers: Pick<OAuthServers, 'oauthServer' | 'oauthServers'>;
  private readonly now: () => number;

  constructor({ db, providers, servers, now = Date.now }: IntegrationServiceDeps) {
    this.db = db;
    this.providers = providers;
    this.byId = new Map(providers.map((provider) => [provider.id, provider]));
    this.servers = servers;
    this.now = now;
  }

  /** The operator's providers (configured order), then the caller's OAuth MCP servers, each with the caller's connection. */
  async catalog(userId: string): Promise<IntegrationView[]> {
    const connections = new Map((await repo.connections(this.db, userId)).map((row) => [row.integration_id, row]));
    const views: IntegrationView[] = this.providers.map((provider) => providerView(provider, connections.get(provider.id) ?? null));
    for (const server of await this.servers.oauthServers(userId)) {
      views.push(serverView(server, connections.get(`${MCP_PREFIX}${server.serverId}`) ?? null));
    }
    return views;
  }

  /** One integration of the caller's catalog; `404` otherwise. */
  async integration(userId: string, integrationId: string): Promise<IntegrationView> {
    const provider = this.byId.get(integrationId);
    if (provider) return providerView(provider, (await repo.findConnection(this.db, userId, integrationId)) ?? null);
    const server = integrationId.startsWith(MCP_PREFIX)
      ? await this.servers.oauthServer(userId, integrationId.slice(MCP_PREFIX.length))
      : null;
    if (!server) throw errors.notFound(NOT_FOUND);
    return serverView(server, (await repo.findConnection(this.db, userId, integrationId)) ?? null);
  }

  /** Whether a connection can no longer be used (refused, or expired with nothing to refresh it): the `expired` clients see. */
  isExpired(row: repo.ConnectionRow): boolean {
    return row.status === 'expired' || (row.refresh_token === null && row.expires_at !== null && row.expires_at.getTime() <= this.now());
  }
}

function providerView(provider: IntegrationProvider, connection: repo.ConnectionRow | null): IntegrationView {
  return { integrationId: provider.id, kind: 'provider', name: provider.name, serverId: null, scopes: provider.scopes, connection };
}

function serverView(server: OAuthServer, connection: repo.ConnectionRow | null): IntegrationView {
  const discovered = connection?.oauth_server as unknown as DiscoveredServer | null | undefined;
  return {
    integrationId: `${MCP_PREFIX}${server.serverId}`,
    kind: 'mcp_server',
    name: server.name,
    serverId: server.serverId,
    scopes: discovered?.scope?.split(' ').filter(Boolean) ?? [],
    connection,
  };
}
