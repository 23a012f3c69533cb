import type { components } from '../../../generated/api';
import type { CommandRow, EnvironmentRow } from './repository';

type Schemas = components['schemas'];

/** An environment as clients see it: `online` while its heartbeats are recent enough. */
export function presentEnvironment(row: EnvironmentRow, offlineAfterMs: number, now = Date.now()): Schemas['AgentEnvironment'] {
  const online = row.last_heartbeat_at !== null && now - row.last_heartbeat_at.getTime() < offlineAfterMs;
  return {
    environmentId: row.id,
    name: row.name,
    platform: row.platform as Schemas['Platform'],
    protocolVersion: row.protocol_version,
    status: online ? 'online' : 'offline',
    agentVersion: row.agent_version,
    reportedStatus: row.reported_status as Schemas['AgentEnvironment']['reportedStatus'],
    lastHeartbeatAt: row.last_heartbeat_at?.getTime() ?? null,
    pendingCommands: row.pending_commands,
    createdAt: row.created_at.getTime(),
    updatedAt: row.updated_at.getTime(),
    // Last, where the writer puts a property whose schema is a oneOf.
    ...(row.filesystem_grant ? { filesystemGrant: row.filesystem_grant as Schemas['FilesystemGrant'] } : {}),
  };
}

export function presentCommand(row: CommandRow): Schemas['AgentCommand'] {
  return {
    commandId: row.id,
    environmentId: row.environment_id,
    type: row.type as Schemas['CommandType'],
    payload: row.payload as Record<string, unknown>,
    status: row.status as Schemas['CommandStatus'],
    deliveries: row.deliveries,
    leaseExpiresAt: row.lease_expires_at?.getTime() ?? null,
    expiresAt: row.expires_at.getTime(),
    errorCode: row.error_code,
    errorMessage: row.error_message,
    createdAt: row.created_at.getTime(),
    acknowledgedAt: row.acknowledged_at?.getTime() ?? null,
  };
}
