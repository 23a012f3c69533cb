import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { OAuthClientInformationMixed } from '@modelcontextprotocol/sdk/shared/auth.js' with { 'resolution-mode': 'import' };
import type { FailureLog } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import { ApiError, errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { Outbound } from '../../platform/net/outbound';
import type { SealedColumn, Secrets } from '../../platform/secrets';
import type { Actor, AuditService } from '../audit/service';
import type { CapabilityService } from '../capabilities/service';
import { type DiscoveredServer, type IntegrationProvider, McpServerFlow, OAuthFailure, ProviderFlow, type TokenSet } from './oauth';
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
 * The caller's MCP servers, as this area needs them (the MCP servers area provides them, which in
 * turn asks this area for tokens): declared here so that neither imports the other's service twice.
 */
export interface OAuthServers {
  /** The caller's server if it authenticates with `oauth` through its own authorization server. */
  oauthServer(userId: string, serverId: string): Promise<OAuthServer | null>;
  /** All of them, oldest first. */
  oauthServers(userId: string): Promise<OAuthServer[]>;
  /** A connection was stored: the caller's servers that use it read their tool catalog again (in the background of the callback). */
  connected(userId: string, integrationId: string): Promise<void>;
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

export const AUTHORIZE_ACTION = 'integration.authorize';
export const CONNECT_ACTION = 'integration.connect';
export const REFRESH_ACTION = 'integration.refresh';
export const DISCONNECT_ACTION = 'integration.disconnect';

/** The path of the web-app callback route (outside /api/v1). */
export const CALLBACK_PATH = '/integrations/callback';
/** MCP servers' integrations are named `mcp:<serverId>`. */
export const MCP_PREFIX = 'mcp:';
/** A token is refreshed when it expires within this long (before it is used). */
const REFRESH_SKEW_MS = 60_000;
/** A waiting request gives up this long after the claim it waits for would have lapsed. */
const WAIT_MARGIN_MS = 5_000;
/** Authorizations under way kept per user and integration (older ones are dropped). */
const PENDING_PER_INTEGRATION = 10;

/** What a connection's access token is sealed for. */
export const accessContext = (id: string) => `integration-access-token:${id}`;
const refreshContext = (id: string) => `integration-refresh-token:${id}`;
const clientContext = (id: string) => `integration-oauth-client:${id}`;
const verifierContext = (stateHash: string) => `integration-code-verifier:${stateHash}`;
const pendingClientContext = (stateHash: string) => `integration-authorization-client:${stateHash}`;

/** The columns holding sealed secrets, for key rotation. */
export const sealedColumns: SealedColumn[] = [
  { table: 'integration_connections', idColumn: 'id', column: 'access_token', context: accessContext },
  { table: 'integration_connections', idColumn: 'id', column: 'refresh_token', context: refreshContext },
  { table: 'integration_connections', idColumn: 'id', column: 'oauth_client', context: clientContext },
  { table: 'integration_authorizations', idColumn: 'state_hash', column: 'code_verifier', context: verifierContext },
  { table: 'integration_authorizations', idColumn: 'state_hash', column: 'oauth_client', context: pendingClientContext },
];

const hashState = (state: string) => createHash('sha256').update(state).digest('base64url');
const NOT_FOUND = 'Integration not found.';

export interface IntegrationServiceDeps {
  db: Database;
  capabilities: Pick<CapabilityService, 'isEnabled'>;
  secrets: Secrets;
  /** The guard of every request to an MCP server's authorization server. */
  outbound: Outbound;
  audit: AuditService;
  settings: IntegrationSettings;
  log?: FailureLog;
  /** Counts each refresh of an access token by its outcome. */
  onRefresh?: (outcome: 'success' | 'refused' | 'unavailable') => void;
  now?: () => number;
}

/**
 * Integrations: the operator's OAuth providers and the caller's MCP servers that sign in with
 * their own authorization server, the caller's connections to them (tokens sealed), the
 * authorization flow (PKCE, a single-use state bound to the caller, an expiry), refreshing tokens
 * when they are used, and disconnecting (revoking where the provider can). Every step is audited,
 * never with a token.
 */
export class IntegrationService {
  private readonly db: Database;
  private readonly capabilities: Pick<CapabilityService, 'isEnabled'>;
  private readonly secrets: Secrets;
  private readonly audit: AuditService;
  readonly settings: IntegrationSettings;
  private readonly providers: Map<string, ProviderFlow>;
  private readonly mcpFlow: McpServerFlow;
  private readonly log: FailureLog;
  private readonly onRefresh: NonNullable<IntegrationServiceDeps['onRefresh']>;
  private readonly now: () => number;
  /** How long a refresh is claimed for: its requests (discovery, then the grant) each within the timeout, and a margin. */
  private readonly leaseMs: number;
  private servers: OAuthServers | null = null;
  /** Catalog reads started by callbacks and not finished yet. */
  private readonly background = new Set<Promise<void>>();

  constructor({
    db,
    capabilities,
    secrets,
    outbound,
    audit,
    settings,
    log = () => undefined,
    onRefresh = () => undefined,
    now = Date.now,
  }: IntegrationServiceDeps) {
    this.db = db;
    this.capabilities = capabilities;
    this.secrets = secrets;
    this.audit = audit;
    this.settings = settings;
    this.providers = new Map(settings.providers.map((provider) => [provider.id, new ProviderFlow(provider, settings.timeoutMs)]));
    this.mcpFlow = new McpServerFlow(outbound, settings.timeoutMs);
    this.log = log;
    this.onRefresh = onRefresh;
    this.now = now;
    this.leaseMs = 2 * settings.timeoutMs + 5_000;
  }

  /** The MCP servers area, given once both are built. */
  useServers(servers: OAuthServers): void {
    this.servers = servers;
  }

  /** Whether the operator configured a provider with this id. */
  hasProvider(integrationId: string): boolean {
    return this.providers.has(integrationId);
  }

  /** The display name of a configured provider, or null. */
  providerName(integrationId: string): string | null {
    return this.providers.get(integrationId)?.provider.name ?? null;
  }

  /** The OAuth redirect URI, or null without a public URL. */
  get redirectUri(): string | null {
    return this.settings.publicUrl === null ? null : `${this.settings.publicUrl}${CALLBACK_PATH}`;
  }

  // ---- the catalog ----

  /** The operator's providers (configured order), then the caller's OAuth MCP servers, each with the caller's connection. */
  async catalog(userId: string): Promise<IntegrationView[]> {
    const connections = new Map((await repo.connections(this.db, userId)).map((row) => [row.integration_id, row]));
    const views: IntegrationView[] = this.settings.providers.map((provider) =>
      this.providerView(provider, connections.get(provider.id) ?? null),
    );
    for (const server of (await this.servers?.oauthServers(userId)) ?? []) {
      views.push(this.serverView(server, connections.get(`${MCP_PREFIX}${server.serverId}`) ?? null));
    }
    return views;
  }

  /** One integration of the caller's catalog; `404` otherwise. */
  async integration(userId: string, integrationId: string): Promise<IntegrationView> {
    const provider = this.providers.get(integrationId)?.provider;
    if (provider) return this.providerView(provider, (await repo.findConnection(this.db, userId, integrationId)) ?? null);
    const server = await this.serverOf(userId, integrationId);
    if (!server) throw errors.notFound(NOT_FOUND);
    return this.serverView(server, (await repo.findConnection(this.db, userId, integrationId)) ?? null);
  }

  /** Whether a connection can no longer be used (refused, or expired with nothing to refresh it): the `expired` clients see. */
  isExpired(row: repo.ConnectionRow): boolean {
    return row.status === 'expired' || (row.refresh_token === null && row.expires_at !== null && row.expires_at.getTime() <= this.now());
  }

  // ---- connecting ----

  /**
   * Starts connecting the caller to an integration: a fresh state (bound to the caller, single use,
   * expiring) and PKCE verifier stored server-side, and the authorization URL to open. For an MCP
   * server, its authorization server is discovered and a client registered first.
   */
  async connect(actor: Actor, integrationId: string): Promise<{ integrationId: string; authorizationUrl: string; expiresAt: Date }> {
    const view = await this.integration(actor.userId, integrationId);
    const redirectUri = this.redirectUri;
    if (redirectUri === null)
      throw errors.conflict(
        'This deployment has no public URL (PUBLIC_URL) to receive OAuth callbacks at, so integrations cannot be connected.',
      );
    const state = randomBytes(32).toString('base64url');
    const stateHash = hashState(state);
    const now = this.now();
    const expiresAt = new Date(now + this.settings.stateTtlMs);
    let authorizationUrl: string;
    let codeVerifier: string;
    let discovered: DiscoveredServer | null = null;
    let client: OAuthClientInformationMixed | null = null;
    try {
      if (view.kind === 'provider') {
        codeVerifier = randomBytes(32).toString('base64url');
        authorizationUrl = await (this.providers.get(integrationId) as ProviderFlow).authorizationUrl(redirectUri, state, codeVerifier);
      } else {
        const server = (await this.serverOf(actor.userId, integrationId)) as OAuthServer;
        const started = await this.mcpFlow.start(server.url, redirectUri, state, this.knownClient(view.connection));
        ({ authorizationUrl, codeVerifier, discovered, client } = started);
      }
    } catch (error) {
      if (!(error instanceof OAuthFailure)) throw error;
      this.log('an integration could not be connected', { integrationId, step: 'authorize', error: error.message, detail: error.detail });
      await this.audit.record(actor, {
        action: AUTHORIZE_ACTION,
        resourceType: 'integration',
        resourceId: integrationId,
        outcome: 'failure',
        metadata: { kind: view.kind, reason: error.message },
      });
      throw errors.integrationError(error.message);
    }
    await this.db.transaction().execute(async (trx) => {
      await repo.deleteExpiredAuthorizations(trx, new Date(now));
      await repo.insertAuthorization(trx, {
        state_hash: stateHash,
        owner_user_id: actor.userId,
        integration_id: integrationId,
        server_id: view.serverId,
        code_verifier: this.secrets.seal(codeVerifier, verifierContext(stateHash)),
        redirect_uri: redirectUri,
        oauth_client: client === null ? null : this.secrets.seal(JSON.stringify(client), pendingClientContext(stateHash)),
        oauth_server: discovered === null ? null : JSON.stringify(discovered),
        expires_at: expiresAt,
        created_at: new Date(now),
      });
      await repo.trimAuthorizations(trx, actor.userId, integrationId, PENDING_PER_INTEGRATION);
      await this.audit.record(
        actor,
        {
          action: AUTHORIZE_ACTION,
          resourceType: 'integration',
          resourceId: integrationId,
          outcome: 'success',
          metadata: { kind: view.kind, expiresAt: expiresAt.getTime() },
        },
        trx,
      );
    });
    return { integrationId, authorizationUrl, expiresAt };
  }

  /**
   * Completes an authorization at the callback: takes the state (at most once), checks its expiry
   * and that the browser is signed in (a browser session) as the user who started connecting,
   * exchanges the code (PKCE) and stores the tokens sealed. Never throws for the flow's sake: the
   * outcome says what happened.
   */
  async complete(input: { query: URLSearchParams; sessionUserId: string | null; requestId: string | null }): Promise<CallbackOutcome> {
    const { query, sessionUserId, requestId } = input;
    const state = query.get('state');
    const fail = (code: string, message: string, integrationId: string | null = null, name: string | null = null): CallbackOutcome => ({
      status: 'failed',
      integrationId,
      name,
      code,
      message,
    });
    if (!state || state.length > 200)
      return fail('invalid_state', 'This authorization is unknown or was already used; start connecting again.');
    const pending = await repo.takeAuthorization(this.db, hashState(state));
    if (!pending) return fail('invalid_state', 'This authorization is unknown or was already used; start connecting again.');
    const integrationId = pending.integration_id;
    const owner: Actor = { userId: pending.owner_user_id, requestId };
    const name = await this.nameOf(integrationId, pending);
    const record = (outcome: 'success' | 'failure' | 'denied', metadata: Record<string, unknown>, actor: Actor = owner) =>
      this.audit.record(actor, { action: CONNECT_ACTION, resourceType: 'integration', resourceId: integrationId, outcome, metadata });
    if (!(await this.capabilities.isEnabled('integrations')))
      return fail('disabled', 'Integrations are disabled for this deployment.', integrationId, name);
    if (sessionUserId === null) {
      // The state alone is not enough: whoever holds an authorization URL could otherwise have another
      // person consent with their own account and receive that person's tokens as their connection.
      await record('denied', { reason: 'sign_in_required' });
      return fail(
        'sign_in_required',
        'This browser is not signed in to the web app: sign in to the web app in this browser, then connect again.',
        integrationId,
        name,
      );
    }
    if (sessionUserId !== pending.owner_user_id) {
      // The browser is signed in as someone else than the user who started connecting: refused, and the state is spent.
      await record('denied', { reason: 'wrong_user' }, { userId: sessionUserId, requestId });
      return fail(
        'wrong_user',
        'This authorization was started by another user; sign in as that user, or start connecting again.',
        integrationId,
        name,
      );
    }
    if (pending.expires_at.getTime() <= this.now()) {
      await record('failure', { reason: 'expired_state' });
      return fail('expired_state', 'This authorization expired before it was completed; start connecting again.', integrationId, name);
    }
    const providerError = query.get('error');
    const code = query.get('code');
    if (providerError !== null || !code) {
      const reason = providerError === 'access_denied' ? 'access_denied' : 'exchange_failed';
      await record('failure', { reason, providerError: providerError?.slice(0, 100) ?? 'no code' });
      return fail(
        reason,
        providerError === 'access_denied'
          ? 'The authorization was declined.'
          : `The provider answered with an error (${(providerError ?? 'no code').slice(0, 100)}).`,
        integrationId,
        name,
      );
    }
    const codeVerifier = this.secrets.open(pending.code_verifier, verifierContext(pending.state_hash));
    let tokens: TokenSet;
    let discovered: DiscoveredServer | null = null;
    let client: OAuthClientInformationMixed | null = null;
    try {
      if (pending.server_id === null) {
        const flow = this.providers.get(integrationId);
        if (!flow) throw new OAuthFailure('refused', 'The deployment no longer offers this integration.', 'provider removed');
        const callbackUrl = new URL(pending.redirect_uri);
        query.forEach((value, key) => callbackUrl.searchParams.append(key, value));
        tokens = await flow.exchange(callbackUrl, state, codeVerifier, this.now());
      } else {
        discovered = pending.oauth_server as unknown as DiscoveredServer;
        client = JSON.parse(
          this.secrets.open(pending.oauth_client as string, pendingClientContext(pending.state_hash)),
        ) as OAuthClientInformationMixed;
        tokens = await this.mcpFlow.exchange(discovered, client, code, codeVerifier, pending.redirect_uri, this.now());
      }
    } catch (error) {
      if (!(error instanceof OAuthFailure)) throw error;
      this.log('an integration could not be connected', { integrationId, step: 'exchange', error: error.message, detail: error.detail });
      await record('failure', { reason: 'exchange_failed', error: error.message });
      return fail('exchange_failed', error.message, integrationId, name);
    }
    await this.store(owner, integrationId, pending.server_id, tokens, discovered, client);
    this.readCatalogsLater(owner.userId, integrationId);
    return { status: 'connected', integrationId, name, code: 'connected', message: `Connected to "${name}".` };
  }

  /** Disconnects: revokes the tokens where the provider can (best effort) and deletes the connection. */
  async disconnect(actor: Actor, integrationId: string): Promise<{ revoked: boolean }> {
    const row = await repo.findConnection(this.db, actor.userId, integrationId);
    if (!row) throw errors.notFound('You have no connection to this integration.');
    let revoked = false;
    let revocationError: string | null = null;
    const refreshToken = row.refresh_token === null ? null : this.secrets.open(row.refresh_token, refreshContext(row.id));
    const token = refreshToken ?? this.secrets.open(row.access_token, accessContext(row.id));
    const hint = refreshToken !== null ? 'refresh_token' : 'access_token';
    try {
      if (row.server_id === null) {
        const flow = this.providers.get(integrationId);
        revoked = flow ? await flow.revoke(token, hint) : false;
      } else {
        revoked = await this.mcpFlow.revoke(
          row.oauth_server as unknown as DiscoveredServer,
          this.clientOf(row) as OAuthClientInformationMixed,
          token,
          hint,
        );
      }
    } catch (error) {
      if (!(error instanceof OAuthFailure)) throw error;
      revocationError = error.message;
      this.log('an integration token could not be revoked', { integrationId, error: error.message, detail: error.detail });
    }
    await this.db.transaction().execute(async (trx) => {
      if (!(await repo.deleteConnection(trx, actor.userId, row.id))) throw errors.notFound('You have no connection to this integration.');
      await this.audit.record(
        actor,
        {
          action: DISCONNECT_ACTION,
          resourceType: 'integration',
          resourceId: integrationId,
          outcome: 'success',
          metadata: { revoked, ...(revocationError ? { revocationError } : {}) },
        },
        trx,
      );
    });
    return { revoked };
  }

  /**
   * Forgets the caller's connection to an integration, if any (revoked where the provider can; a
   * failure to revoke is logged), and the authorizations under way for it: an MCP server being
   * deleted, or reached elsewhere, takes its own connection with it.
   */
  async forget(actor: Actor, integrationId: string): Promise<void> {
    await repo.deleteAuthorizations(this.db, actor.userId, integrationId);
    try {
      await this.disconnect(actor, integrationId);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
    }
  }

  // ---- using a connection ----

  /**
   * A usable access token of the user's connection, refreshed first when it expires within a
   * minute. One request at a time refreshes a connection (any instance): it claims the refresh
   * with a conditional update (a lease, held for no longer than the refresh's requests may take,
   * and no transaction is held open over them); the others wait for its tokens, checking the
   * stored version, and use them. With `rejected` (the token a resource server just refused with
   * 401), that token is refreshed whatever its expiry. NotConnected when there is none or it
   * cannot be refreshed; IntegrationUnavailable when the authorization server cannot be reached now.
   */
  async accessToken(userId: string, integrationId: string, name: string, rejected?: string): Promise<string> {
    let row = await repo.findConnection(this.db, userId, integrationId);
    const readVersion = row?.version;
    const deadline = this.now() + this.leaseMs + WAIT_MARGIN_MS;
    for (;;) {
      if (!row) throw new NotConnected(integrationId, 'missing', name);
      if (row.status === 'expired') throw new NotConnected(integrationId, 'expired', name);
      const current = this.secrets.open(row.access_token, accessContext(row.id));
      // `rejected`: the resource server refused this token; a newer one (refreshed meanwhile) is used as it is.
      const refused = rejected !== undefined && rejected === current;
      const now = this.now();
      const fresh = row.expires_at === null || row.expires_at.getTime() - REFRESH_SKEW_MS > now;
      if (fresh && !refused) return current;
      // Refreshed by another request while this one waited: its token is used while it has not expired.
      const unexpired = row.expires_at === null || row.expires_at.getTime() > now;
      if (row.version !== readVersion && !refused && unexpired) return current;
      if (row.refresh_token === null) {
        if (!refused && unexpired) return current;
        if (refused) await repo.updateConnectionAtVersion(this.db, row.id, row.version, { status: 'expired', updated_at: new Date(now) });
        throw new NotConnected(integrationId, 'expired', name);
      }
      const until = new Date(now + this.leaseMs);
      const claimed = await repo.claimRefresh(this.db, row.id, row.version, new Date(now), until);
      if (claimed) return this.refresh(claimed, until, name);
      row = await this.refreshedMeanwhile(row, deadline, name);
    }
  }

  /**
   * Waits while another request holds the refresh of `row` (bounded by `deadline`): the connection
   * as it is once it changed (new tokens, expired, replaced or removed) or the claim ended or lapsed.
   */
  private async refreshedMeanwhile(row: repo.ConnectionRow, deadline: number, name: string): Promise<repo.ConnectionRow | undefined> {
    let pause = 10;
    for (;;) {
      const latest = await repo.findConnection(this.db, row.owner_user_id, row.integration_id);
      if (!latest || latest.id !== row.id || latest.version !== row.version || latest.status !== 'active') return latest;
      if (latest.refreshing_until === null || latest.refreshing_until.getTime() <= this.now()) return latest;
      if (this.now() >= deadline)
        throw new IntegrationUnavailable(
          `The token of "${name}" is being refreshed by another request that has not finished. Try again shortly.`,
        );
      await sleep(pause);
      pause = Math.min(pause * 2, 250);
    }
  }

  /** Refreshes the tokens of `row`, whose refresh this request claimed until `until`, and stores them over that version. */
  private async refresh(row: repo.ConnectionRow, until: Date, name: string): Promise<string> {
    const actor: Actor = { userId: row.owner_user_id, requestId: null };
    const refreshToken = this.secrets.open(row.refresh_token as string, refreshContext(row.id));
    const record = (outcome: 'success' | 'failure', metadata: Record<string, unknown>) =>
      this.audit.record(actor, { action: REFRESH_ACTION, resourceType: 'integration', resourceId: row.integration_id, outcome, metadata });
    let tokens: TokenSet;
    try {
      if (row.server_id === null) {
        const flow = this.providers.get(row.integration_id);
        if (!flow) throw new OAuthFailure('refused', 'The deployment no longer offers this integration.', 'provider removed');
        tokens = await flow.refresh(refreshToken, this.now());
      } else {
        tokens = await this.mcpFlow.refresh(
          row.oauth_server as unknown as DiscoveredServer,
          this.clientOf(row) as OAuthClientInformationMixed,
          refreshToken,
          this.now(),
        );
      }
    } catch (error) {
      const refusedNow = error instanceof OAuthFailure && error.kind === 'refused';
      // Only the holder of the claim, at the version it refreshed, marks the connection expired; otherwise the claim just ends.
      const expired = refusedNow
        ? await repo.updateConnectionUnderClaim(this.db, row.id, row.version, until, {
            status: 'expired',
            updated_at: new Date(this.now()),
          })
        : undefined;
      if (!refusedNow) await repo.releaseRefresh(this.db, row.id, row.version, until);
      if (!(error instanceof OAuthFailure)) throw error;
      // Refused, but the claim no longer held: another request decides what becomes of the connection.
      let undecided = false;
      if (refusedNow && !expired) {
        const latest = await repo.findConnection(this.db, row.owner_user_id, row.integration_id);
        // Connected again, or refreshed by another request after this claim lapsed: its tokens are used.
        if (latest && latest.status === 'active' && latest.version !== row.version)
          return this.secrets.open(latest.access_token, accessContext(latest.id));
        undecided = latest?.status === 'active';
      }
      this.onRefresh(error.kind);
      this.log('an integration token could not be refreshed', {
        integrationId: row.integration_id,
        kind: error.kind,
        error: error.message,
        detail: error.detail,
      });
      await record('failure', { reason: error.kind, error: error.message });
      if (error.kind === 'unavailable' || undecided) throw new IntegrationUnavailable(`${error.message} Try again shortly.`);
      throw new NotConnected(row.integration_id, 'expired', name);
    }
    const now = new Date(this.now());
    // Stored over the version refreshed (claim held or, past its lease, not taken by another refresh): tokens that work are never thrown away for a lapsed claim.
    const stored = await repo.updateConnectionAtVersion(this.db, row.id, row.version, {
      access_token: this.secrets.seal(tokens.accessToken, accessContext(row.id)),
      refresh_token: tokens.refreshToken === null ? null : this.secrets.seal(tokens.refreshToken, refreshContext(row.id)),
      token_type: tokens.tokenType,
      scope: tokens.scope ?? row.scope,
      expires_at: tokens.expiresAt,
      refreshed_at: now,
      refreshing_until: null,
      updated_at: now,
    });
    if (!stored) {
      // Connected again, disconnected or expired meanwhile: these tokens were not kept, so this refresh is no success.
      const latest = await repo.findConnection(this.db, row.owner_user_id, row.integration_id);
      this.log('refreshed integration tokens were not stored: the connection changed meanwhile', {
        integrationId: row.integration_id,
        connection: latest ? latest.status : 'removed',
      });
      if (latest && latest.status === 'active') return this.secrets.open(latest.access_token, accessContext(latest.id));
      throw new NotConnected(row.integration_id, latest ? 'expired' : 'missing', name);
    }
    this.onRefresh('success');
    await record('success', { expiresAt: tokens.expiresAt?.getTime() ?? null });
    return tokens.accessToken;
  }

  /** Waits for the catalog reads the callbacks started (at shutdown, before the database closes). */
  async settle(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  // ---- internals ----

  /**
   * The MCP servers that sign in with a connection just stored read their catalogs again, in the
   * background: the browser is answered at once rather than after each server's timeout. Their
   * outcome is stored on each server (its status and error); anything else is logged.
   */
  private readCatalogsLater(userId: string, integrationId: string): void {
    if (!this.servers) return;
    const task: Promise<void> = this.servers
      .connected(userId, integrationId)
      .catch((error: unknown) => {
        this.log('MCP servers could not read their catalogs after a connection', { integrationId, error: (error as Error).message });
      })
      .finally(() => this.background.delete(task));
    this.background.add(task);
  }

  /** Stores new tokens as the caller's connection (replacing an earlier one), audited. */
  private async store(
    actor: Actor,
    integrationId: string,
    serverId: string | null,
    tokens: TokenSet,
    discovered: DiscoveredServer | null,
    client: OAuthClientInformationMixed | null,
  ): Promise<void> {
    const now = new Date(this.now());
    await this.db.transaction().execute(async (trx) => {
      await lockForTransaction(trx, `integration:${actor.userId}:${integrationId}`);
      const existing = await repo.findConnection(trx, actor.userId, integrationId);
      const id = existing?.id ?? uuidv7(now.getTime());
      const fields = {
        server_id: serverId,
        status: 'active',
        access_token: this.secrets.seal(tokens.accessToken, accessContext(id)),
        refresh_token: tokens.refreshToken === null ? null : this.secrets.seal(tokens.refreshToken, refreshContext(id)),
        token_type: tokens.tokenType,
        scope: tokens.scope,
        account: tokens.account,
        expires_at: tokens.expiresAt,
        oauth_client: client === null ? null : this.secrets.seal(JSON.stringify(client), clientContext(id)),
        oauth_server: discovered === null ? null : JSON.stringify(discovered),
        refreshed_at: null,
        refreshing_until: null,
        updated_at: now,
      };
      if (existing) await repo.updateConnection(trx, id, { ...fields, version: existing.version + 1, created_at: now });
      else
        await repo.insertConnection(trx, {
          id,
          owner_user_id: actor.userId,
          integration_id: integrationId,
          ...fields,
          version: 1,
          created_at: now,
        });
      await this.audit.record(
        actor,
        {
          action: CONNECT_ACTION,
          resourceType: 'integration',
          resourceId: integrationId,
          outcome: 'success',
          metadata: {
            scope: tokens.scope,
            hasRefreshToken: tokens.refreshToken !== null,
            expiresAt: tokens.expiresAt?.getTime() ?? null,
            replaced: existing !== undefined,
          },
        },
        trx,
      );
    });
  }

  private clientOf(row: repo.ConnectionRow): OAuthClientInformationMixed | null {
    return row.oauth_client === null
      ? null
      : (JSON.parse(this.secrets.open(row.oauth_client, clientContext(row.id))) as OAuthClientInformationMixed);
  }

  /** The client registered and the server discovered by an earlier connection, to reuse the registration. */
  private knownClient(row: repo.ConnectionRow | null): { discovered: DiscoveredServer; client: OAuthClientInformationMixed } | null {
    if (!row || row.oauth_server === null || row.oauth_client === null) return null;
    const client = this.clientOf(row);
    return client ? { discovered: row.oauth_server as unknown as DiscoveredServer, client } : null;
  }

  /** The caller's OAuth MCP server an `mcp:<serverId>` integration names, or null. */
  private async serverOf(userId: string, integrationId: string): Promise<OAuthServer | null> {
    if (!integrationId.startsWith(MCP_PREFIX) || !this.servers) return null;
    return this.servers.oauthServer(userId, integrationId.slice(MCP_PREFIX.length));
  }

  private async nameOf(integrationId: string, pending: repo.AuthorizationRow): Promise<string> {
    const provider = this.providers.get(integrationId)?.provider.name;
    if (provider) return provider;
    const server = pending.server_id === null ? null : await this.servers?.oauthServer(pending.owner_user_id, pending.server_id);
    return server?.name ?? integrationId;
  }

  private providerView(provider: IntegrationProvider, connection: repo.ConnectionRow | null): IntegrationView {
    return { integrationId: provider.id, kind: 'provider', name: provider.name, serverId: null, scopes: provider.scopes, connection };
  }

  private serverView(server: OAuthServer, connection: repo.ConnectionRow | null): IntegrationView {
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
}
