import { setTimeout as sleep } from 'node:timers/promises';
import type { OAuthClientInformationMixed } from '@modelcontextprotocol/sdk/shared/auth.js' with { 'resolution-mode': 'import' };
import type { FailureLog } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import { ApiError, errors } from '../../platform/errors';
import type { Secrets } from '../../platform/secrets';
import type { Actor, AuditService } from '../audit/service';
import type { OAuthFlows } from './flows';
import { type DiscoveredServer, OAuthFailure, type TokenSet } from './oauth';
import * as repo from './repository';
import { accessContext, clientOf, type IntegrationAccess, IntegrationUnavailable, NotConnected, refreshContext } from './service';

export const REFRESH_ACTION = 'integration.refresh';
export const DISCONNECT_ACTION = 'integration.disconnect';

/** A token is refreshed when it expires within this long (before it is used). */
const REFRESH_SKEW_MS = 60_000;
/** A waiting request gives up this long after the claim it waits for would have lapsed. */
const WAIT_MARGIN_MS = 5_000;

export interface IntegrationConnectionDeps {
  db: Database;
  secrets: Secrets;
  audit: AuditService;
  flows: OAuthFlows;
  /** How long one request to an authorization server may take. */
  timeoutMs: number;
  log?: FailureLog;
  /** Counts each refresh of an access token by its outcome. */
  onRefresh?: (outcome: 'success' | 'refused' | 'unavailable') => void;
  now?: () => number;
}

/**
 * The caller's connections in use: a usable access token of one (refreshed when it is due, one
 * refresh per connection at a time), and disconnecting (revoking where the provider can). Every
 * refresh and disconnection is audited, never with a token.
 */
export class IntegrationConnectionService implements IntegrationAccess {
  private readonly db: Database;
  private readonly secrets: Secrets;
  private readonly audit: AuditService;
  private readonly flows: OAuthFlows;
  private readonly log: FailureLog;
  private readonly onRefresh: NonNullable<IntegrationConnectionDeps['onRefresh']>;
  private readonly now: () => number;
  /** How long a refresh is claimed for: its requests (discovery, then the grant) each within the timeout, and a margin. */
  private readonly leaseMs: number;

  constructor({
    db,
    secrets,
    audit,
    flows,
    timeoutMs,
    log = () => undefined,
    onRefresh = () => undefined,
    now = Date.now,
  }: IntegrationConnectionDeps) {
    this.db = db;
    this.secrets = secrets;
    this.audit = audit;
    this.flows = flows;
    this.log = log;
    this.onRefresh = onRefresh;
    this.now = now;
    this.leaseMs = 2 * timeoutMs + 5_000;
  }

  /** Whether the operator configured a provider with this id. */
  hasProvider(integrationId: string): boolean {
    return this.flows.provider(integrationId) !== undefined;
  }

  /** The display name of a configured provider, or null. */
  providerName(integrationId: string): string | null {
    return this.flows.provider(integrationId)?.provider.name ?? null;
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
        const flow = this.flows.provider(integrationId);
        revoked = flow ? await flow.revoke(token, hint) : false;
      } else {
        revoked = await this.flows.servers.revoke(
          row.oauth_server as unknown as DiscoveredServer,
          clientOf(this.secrets, row) as OAuthClientInformationMixed,
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
        const flow = this.flows.provider(row.integration_id);
        if (!flow) throw new OAuthFailure('refused', 'The deployment no longer offers this integration.', 'provider removed');
        tokens = await flow.refresh(refreshToken, this.now());
      } else {
        tokens = await this.flows.servers.refresh(
          row.oauth_server as unknown as DiscoveredServer,
          clientOf(this.secrets, row) as OAuthClientInformationMixed,
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
}
