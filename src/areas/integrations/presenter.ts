import type { Schemas } from '../../platform/api-types';
import type { ConnectionRow } from './repository';
import type { IntegrationView } from './service';

/** A connection as clients see it: its state, never its tokens. */
export function presentConnection(row: ConnectionRow, expired: boolean): NonNullable<Schemas['IntegrationConnection']> {
  return {
    status: expired ? 'expired' : 'connected',
    account: row.account,
    scopes: row.scope?.split(' ').filter((scope) => scope !== '') ?? [],
    connectedAt: row.created_at.getTime(),
    refreshedAt: row.refreshed_at?.getTime() ?? null,
    expiresAt: row.expires_at?.getTime() ?? null,
  };
}

export function presentIntegration(view: IntegrationView, isExpired: (row: ConnectionRow) => boolean): Schemas['Integration'] {
  return {
    integrationId: view.integrationId,
    kind: view.kind,
    name: view.name,
    serverId: view.serverId,
    scopes: view.scopes,
    connection: view.connection === null ? null : presentConnection(view.connection, isExpired(view.connection)),
  };
}
