import { createHash, randomBytes } from 'node:crypto';
import type { OAuthClientInformationMixed } from '@modelcontextprotocol/sdk/shared/auth.js' with { 'resolution-mode': 'import' };
import type { FailureLog } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { lockForTransaction } from '../../platform/db/locks';
import { errors } from '../../platform/errors';
import { uuidv7 } from '../../platform/ids';
import type { Secrets } from '../../platform/secrets';
import type { Actor, AuditService } from '../audit/service';
import type { CapabilityService } from '../capabilities/service';
import type { OAuthFlows } from './flows';
import { type DiscoveredServer, OAuthFailure, type TokenSet } from './oauth';
import type { ProviderFlow } from './provider-flow';
import * as repo from './repository';
import {
  accessContext,
  CALLBACK_PATH,
  type CallbackOutcome,
  clientOf,
  type IntegrationService,
  type IntegrationSettings,
  type OAuthServer,
  type OAuthServers,
  pendingClientContext,
  refreshContext,
  sealClient,
  verifierContext,
} from './service';

export const AUTHORIZE_ACTION = 'integration.authorize';
export const CONNECT_ACTION = 'integration.connect';

/** Authorizations under way kept per user and integration (older ones are dropped). */
const PENDING_PER_INTEGRATION = 10;

const hashState = (state: string) => createHash('sha256').update(state).digest('base64url');

export interface IntegrationAuthorizationDeps {
  db: Database;
  capabilities: Pick<CapabilityService, 'isEnabled'>;
  secrets: Secrets;
  audit: AuditService;
  flows: OAuthFlows;
  /** The caller's catalog, which says what they may connect. */
  catalog: Pick<IntegrationService, 'integration'>;
  /** The caller's MCP servers, told when a connection they sign in with is stored. */
  servers: Pick<OAuthServers, 'oauthServer' | 'connected'>;
  settings: Pick<IntegrationSettings, 'publicUrl' | 'stateTtlMs'>;
  log?: FailureLog;
  now?: () => number;
}

/**
 * Connecting a caller to an integration: the authorization flow (PKCE, a single-use state bound to
 * the caller, an expiry), completed at the callback, and the tokens it brings stored sealed as the
 * caller's connection. Every step is audited, never with a token.
 */
export class IntegrationAuthorizationService {
  private readonly db: Database;
  private readonly capabilities: Pick<CapabilityService, 'isEnabled'>;
  private readonly secrets: Secrets;
  private readonly audit: AuditService;
  private readonly flows: OAuthFlows;
  private readonly catalog: Pick<IntegrationService, 'integration'>;
  private readonly servers: Pick<OAuthServers, 'oauthServer' | 'connected'>;
  private readonly settings: Pick<IntegrationSettings, 'publicUrl' | 'stateTtlMs'>;
  private readonly log: FailureLog;
  private readonly now: () => number;
  /** Catalog reads started by callbacks and not finished yet. */
  private readonly background = new Set<Promise<void>>();

  constructor({
    db,
    capabilities,
    secrets,
    audit,
    flows,
    catalog,
    servers,
    settings,
    log = () => undefined,
    now = Date.now,
  }: IntegrationAuthorizationDeps) {
    this.db = db;
    this.capabilities = capabilities;
    this.secrets = secrets;
    this.audit = audit;
    this.flows = flows;
    this.catalog = catalog;
    this.servers = servers;
    this.settings = settings;
    this.log = log;
    this.now = now;
  }

  /** The OAuth redirect URI, or null without a public URL. */
  private get redirectUri(): string | null {
    return this.settings.publicUrl === null ? null : `${this.settings.publicUrl}${CALLBACK_PATH}`;
  }

  /**
   * Starts connecting the caller to an integration: a fresh state (bound to the caller, single use,
   * expiring) and PKCE verifier stored server-side, and the authorization URL to open. For an MCP
   * server, its authorization server is discovered and a client registered first.
   */
  async connect(actor: Actor, integrationId: string): Promise<{ integrationId: string; authorizationUrl: string; expiresAt: Date }> {
    const view = await this.catalog.integration(actor.userId, integrationId);
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
        authorizationUrl = await (this.flows.provider(integrationId) as ProviderFlow).authorizationUrl(redirectUri, state, codeVerifier);
      } else {
        const server = (await this.servers.oauthServer(actor.userId, view.serverId as string)) as OAuthServer;
        const started = await this.flows.servers.start(server.url, redirectUri, state, this.knownClient(view.connection));
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
        const flow = this.flows.provider(integrationId);
        if (!flow) throw new OAuthFailure('refused', 'The deployment no longer offers this integration.', 'provider removed');
        const callbackUrl = new URL(pending.redirect_uri);
        query.forEach((value, key) => callbackUrl.searchParams.append(key, value));
        tokens = await flow.exchange(callbackUrl, state, codeVerifier, this.now());
      } else {
        discovered = pending.oauth_server as unknown as DiscoveredServer;
        client = JSON.parse(
          this.secrets.open(pending.oauth_client as string, pendingClientContext(pending.state_hash)),
        ) as OAuthClientInformationMixed;
        tokens = await this.flows.servers.exchange(discovered, client, code, codeVerifier, pending.redirect_uri, this.now());
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

  /** Waits for the catalog reads the callbacks started (at shutdown, before the database closes). */
  async settle(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  /**
   * The MCP servers that sign in with a connection just stored read their catalogs again, in the
   * background: the browser is answered at once rather than after each server's timeout. Their
   * outcome is stored on each server (its status and error); anything else is logged.
   */
  private readCatalogsLater(userId: string, integrationId: string): void {
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
        oauth_client: client === null ? null : sealClient(this.secrets, id, client),
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

  /** The client registered and the server discovered by an earlier connection, to reuse the registration. */
  private knownClient(row: repo.ConnectionRow | null): { discovered: DiscoveredServer; client: OAuthClientInformationMixed } | null {
    if (!row || row.oauth_server === null || row.oauth_client === null) return null;
    const client = clientOf(this.secrets, row);
    return client ? { discovered: row.oauth_server as unknown as DiscoveredServer, client } : null;
  }

  private async nameOf(integrationId: string, pending: repo.AuthorizationRow): Promise<string> {
    const provider = this.flows.provider(integrationId)?.provider.name;
    if (provider) return provider;
    const server = pending.server_id === null ? null : await this.servers.oauthServer(pending.owner_user_id, pending.server_id);
    return server?.name ?? integrationId;
  }
}
