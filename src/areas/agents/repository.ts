import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import type { AgentCommands, AgentEnvironments } from '../../../generated/db';
import type { Schemas } from '../../platform/api-types';
import type { Database } from '../../platform/db';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { epochMs, epochMsOrNull } from '../../platform/db/timestamps';

export type EnvironmentRow = Selectable<AgentEnvironments> & { pending_commands: number };
export type CommandRow = Selectable<AgentCommands>;
export type CommandStatus = Schemas['CommandStatus'];

/** Environments with how many of their commands wait (queued or claimed, not expired). */
function environments(db: Database, now: Date) {
  return db.selectFrom('agent_environments as e').select((eb) =>
    eb
      .selectFrom('agent_commands as c')
      .select(sql<number>`count(*)::int`.as('n'))
      .whereRef('c.environment_id', '=', 'e.id')
      .where('c.status', 'in', ['queued', 'claimed'])
      .where('c.expires_at', '>', now)
      .as('pending_commands'),
  );
}

export async function findEnvironment(db: Database, userId: string, id: string, now: Date): Promise<EnvironmentRow | undefined> {
  const row = await environments(db, now).selectAll('e').where('e.owner_user_id', '=', userId).where('e.id', '=', id).executeTakeFirst();
  return row && { ...row, pending_commands: Number(row.pending_commands ?? 0) };
}

/** What an environment is presented with: the list reads only these (not its credential), and its times as epoch milliseconds. */
const ENVIRONMENT_FIELDS = [
  'e.id',
  'e.name',
  'e.platform',
  'e.protocol_version',
  'e.agent_version',
  'e.reported_status',
  'e.filesystem_grant',
] as const;

/** The owner's environments, with their waiting commands as of `now`; read a page at a time. */
export const environmentList = listQuery({
  id: 'e.id',
  rows: (db, { ownerUserId, now }: { ownerUserId: string; now: Date }) =>
    environments(db, now)
      .select([...ENVIRONMENT_FIELDS, epochMsOrNull('e.last_heartbeat_at'), epochMs('e.created_at'), epochMs('e.updated_at')])
      .where('e.owner_user_id', '=', ownerUserId),
});
export type EnvironmentView = ListedRecord<EnvironmentRow, typeof environmentList>;

export async function countEnvironments(db: Database, userId: string): Promise<number> {
  const row = await db
    .selectFrom('agent_environments')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('owner_user_id', '=', userId)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

export async function insertEnvironment(db: Database, row: Insertable<AgentEnvironments>): Promise<void> {
  await db.insertInto('agent_environments').values(row).execute();
}

export async function updateEnvironment(db: Database, userId: string, id: string, patch: Updateable<AgentEnvironments>): Promise<boolean> {
  const result = await db
    .updateTable('agent_environments')
    .set(patch)
    .where('owner_user_id', '=', userId)
    .where('id', '=', id)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function deleteEnvironment(db: Database, userId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('agent_environments').where('owner_user_id', '=', userId).where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * Applies the passage of time to an environment's commands: past `expires_at` they are expired,
 * and claimed ones whose lease ended go back to the queue (keeping their id).
 */
export async function settleCommands(db: Database, environmentId: string, now: Date): Promise<void> {
  await db
    .updateTable('agent_commands')
    .set({ status: 'expired', lease_expires_at: null })
    .where('environment_id', '=', environmentId)
    .where('status', 'in', ['queued', 'claimed'])
    .where('expires_at', '<=', now)
    .execute();
  await db
    .updateTable('agent_commands')
    .set({ status: 'queued', lease_expires_at: null })
    .where('environment_id', '=', environmentId)
    .where('status', '=', 'claimed')
    .where('lease_expires_at', '<=', now)
    .execute();
}

/** Claims up to `limit` queued commands, oldest first, skipping any another heartbeat is claiming. */
export function claimCommands(db: Database, environmentId: string, leaseUntil: Date, limit: number): Promise<CommandRow[]> {
  return db
    .updateTable('agent_commands')
    .set((eb) => ({ status: 'claimed', lease_expires_at: leaseUntil, deliveries: eb('deliveries', '+', 1) }))
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('agent_commands')
        .select('id')
        .where('environment_id', '=', environmentId)
        .where('status', '=', 'queued')
        .orderBy('id')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .returningAll()
    .execute()
    .then((rows) => rows.sort((a, b) => a.id.localeCompare(b.id)));
}

export async function countWaiting(db: Database, environmentId: string): Promise<number> {
  const row = await db
    .selectFrom('agent_commands')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('environment_id', '=', environmentId)
    .where('status', 'in', ['queued', 'claimed'])
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

export function insertCommand(db: Database, row: Insertable<AgentCommands>): Promise<CommandRow> {
  return db.insertInto('agent_commands').values(row).returningAll().executeTakeFirstOrThrow();
}

export function findCommand(
  db: Database,
  environmentId: string,
  id: string,
  options: { lock?: boolean } = {},
): Promise<CommandRow | undefined> {
  let query = db.selectFrom('agent_commands').selectAll().where('environment_id', '=', environmentId).where('id', '=', id);
  if (options.lock) query = query.forUpdate();
  return query.executeTakeFirst();
}

/** What a command is presented with: the list reads these, and its times as epoch milliseconds. */
const COMMAND_FIELDS = ['id', 'environment_id', 'type', 'payload', 'status', 'deliveries', 'error_code', 'error_message'] as const;

/** An environment's commands, filtered; read a page at a time. */
export const commandList = listQuery({
  id: 'id',
  rows: (db, { environmentId, status }: { environmentId: string; status?: CommandStatus }) => {
    let query = db
      .selectFrom('agent_commands')
      .select([
        ...COMMAND_FIELDS,
        epochMsOrNull('lease_expires_at'),
        epochMs('expires_at'),
        epochMs('created_at'),
        epochMsOrNull('acknowledged_at'),
      ])
      .where('environment_id', '=', environmentId);
    if (status !== undefined) query = query.where('status', '=', sql.lit(status)); // a closed set, written in as ownedList does
    return query;
  },
});
export type CommandView = ListedRecord<CommandRow, typeof commandList>;

export function updateCommand(db: Database, id: string, patch: Updateable<AgentCommands>): Promise<CommandRow> {
  return db.updateTable('agent_commands').set(patch).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}
