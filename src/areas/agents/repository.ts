import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import type { AgentCommands, AgentEnvironments } from '../../../generated/db';
import type { Schemas } from '../../platform/api-types';
import type { PageRequest } from '../../platform/pagination';
import type { Database } from '../../platform/db';

export type EnvironmentRow = Selectable<AgentEnvironments> & { pending_commands: number };
export type CommandRow = Selectable<AgentCommands>;
export type CommandStatus = Schemas['CommandStatus'];

/** Environments with how many of their commands wait (queued or claimed, not expired). */
function environments(db: Database, now: Date) {
  return db
    .selectFrom('agent_environments as e')
    .selectAll('e')
    .select((eb) =>
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
  const row = await environments(db, now).where('e.owner_user_id', '=', userId).where('e.id', '=', id).executeTakeFirst();
  return row && { ...row, pending_commands: Number(row.pending_commands ?? 0) };
}

export async function listEnvironments(db: Database, userId: string, page: PageRequest, now: Date): Promise<EnvironmentRow[]> {
  let query = environments(db, now).where('e.owner_user_id', '=', userId);
  if (page.beforeId !== null) query = query.where('e.id', '<', page.beforeId);
  const rows = await query.orderBy('e.id', 'desc').limit(page.limit + 1).execute();
  return rows.map((row) => ({ ...row, pending_commands: Number(row.pending_commands ?? 0) }));
}

export async function countEnvironments(db: Database, userId: string): Promise<number> {
  const row = await db.selectFrom('agent_environments').select(sql<number>`count(*)::int`.as('n')).where('owner_user_id', '=', userId).executeTakeFirst();
  return Number(row?.n ?? 0);
}

export async function insertEnvironment(db: Database, row: Insertable<AgentEnvironments>): Promise<void> {
  await db.insertInto('agent_environments').values(row).execute();
}

export async function updateEnvironment(db: Database, userId: string, id: string, patch: Updateable<AgentEnvironments>): Promise<boolean> {
  const result = await db.updateTable('agent_environments').set(patch).where('owner_user_id', '=', userId).where('id', '=', id).executeTakeFirst();
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
      eb.selectFrom('agent_commands').select('id').where('environment_id', '=', environmentId).where('status', '=', 'queued').orderBy('id').limit(limit).forUpdate().skipLocked(),
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

export function findCommand(db: Database, environmentId: string, id: string, options: { lock?: boolean } = {}): Promise<CommandRow | undefined> {
  let query = db.selectFrom('agent_commands').selectAll().where('environment_id', '=', environmentId).where('id', '=', id);
  if (options.lock) query = query.forUpdate();
  return query.executeTakeFirst();
}

export function listCommands(db: Database, environmentId: string, filter: { status?: CommandStatus }, page: PageRequest): Promise<CommandRow[]> {
  let query = db.selectFrom('agent_commands').selectAll().where('environment_id', '=', environmentId);
  if (filter.status !== undefined) query = query.where('status', '=', filter.status);
  if (page.beforeId !== null) query = query.where('id', '<', page.beforeId);
  return query.orderBy('id', 'desc').limit(page.limit + 1).execute();
}

export function updateCommand(db: Database, id: string, patch: Updateable<AgentCommands>): Promise<CommandRow> {
  return db.updateTable('agent_commands').set(patch).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}
