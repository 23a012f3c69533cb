import type { components } from '../../../generated/api';
import { millis, millisOrNull } from '../../platform/db/timestamps';
import type { CommandView, EnvironmentView } from './repository';

type Schemas = components['schemas'];

/** An environment as clients see it: `online` while its heartbeats are recent enough. */
export function presentEnvironment(row: EnvironmentView, offlineAfterMs: number, now = Date.now()): Schemas['AgentEnvironment'] {
  const heartbeat = millisOrNull(row.last_heartbeat_at);
  const online = heartbeat !== null && now - heartbeat < offlineAfterMs;
  return {
    environmentId: row.id,
    name: row.name,
    platform: row.platform as Schemas['Platform'],
    protocolVersion: row.protocol_version,
    status: online ? 'online' : 'offline',
    agentVersion: row.agent_version,
    reportedStatus: row.reported_status as Schemas['AgentEnvironment']['reportedStatus'],
    lastHeartbeatAt: heartbeat,
    pendingCommands: row.pending_commands,
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
    // Last, where the writer puts a property whose schema is a oneOf.
    ...(row.filesystem_grant ? { filesystemGrant: row.filesystem_grant as Schemas['FilesystemGrant'] } : {}),
  };
}

export function presentCommand(row: CommandView): Schemas['AgentCommand'] {
  return {
    commandId: row.id,
    environmentId: row.environment_id,
    type: row.type as Schemas['CommandType'],
    payload: row.payload as Record<string, unknown>,
    status: row.status as Schemas['CommandStatus'],
    deliveries: row.deliveries,
    leaseExpiresAt: millisOrNull(row.lease_expires_at),
    expiresAt: millis(row.expires_at),
    errorCode: row.error_code,
    errorMessage: row.error_message,
    createdAt: millis(row.created_at),
    acknowledgedAt: millisOrNull(row.acknowledged_at),
  };
}
