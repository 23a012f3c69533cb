import { type Insertable, type Selectable, sql, type Transaction, type Updateable } from 'kysely';
import type { AutomationRuns, Automations } from '../../../generated/db';
import type { Schemas } from '../../platform/api-types';
import type { Database, DB } from '../../platform/db';
import type { ListedRecord } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';

export type AutomationRow = Selectable<Automations>;
export type RunRow = Selectable<AutomationRuns>;
export type RunStatus = Schemas['AutomationRunStatus'];
/** A run's `trigger`: the column is text, held to these values by the table's check. */
export type RunTrigger = Schemas['AutomationRun']['trigger'];

export const { find: findAutomation, update: updateAutomation, remove: deleteAutomation } = ownedRecords('automations');

export function findAutomationById(db: Database, id: string) {
  return db.selectFrom('automations').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The owner's automations, filtered; read a page at a time. */
export const automationList = ownedList('automations', {
  fields: ['name', 'prompt', 'cron', 'timezone', 'enabled', 'project_id', 'skill_ids', 'model', 'output_format'],
  times: ['next_run_at', 'created_at', 'updated_at'],
  filters: { enabled: 'enabled' },
});
export type AutomationView = ListedRecord<'automations', typeof automationList>;

export function insertAutomation(db: Database, row: Insertable<Automations>) {
  return db.insertInto('automations').values(row).returningAll().executeTakeFirstOrThrow();
}

// ---- the scheduler ----

/**
 * Locks up to `limit` due schedules for the transaction, skipping those another instance holds,
 * so that instances ticking together share the due slots instead of all working on the same ones.
 */
export function lockDueAutomations(trx: Transaction<DB>, now: Date, limit: number) {
  return trx
    .selectFrom('automations')
    .select(['id', 'owner_user_id', 'cron', 'timezone', 'next_run_at'])
    .where('enabled', '=', true)
    .where('cron', 'is not', null)
    .where('next_run_at', '<=', now)
    .orderBy('next_run_at')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .execute();
}

/** Claims slots: how many runs these inserts created (a slot already claimed stays as it is). */
export async function insertScheduledRuns(trx: Transaction<DB>, rows: Insertable<AutomationRuns>[]): Promise<number> {
  const inserted = await trx
    .insertInto('automation_runs')
    .values(rows)
    .onConflict((oc) => oc.columns(['automation_id', 'scheduled_for']).doNothing())
    .returning('id')
    .execute();
  return inserted.length;
}

/** Moves each automation's next slot forward (never back, whichever instance writes last). */
export async function advanceNextRuns(trx: Transaction<DB>, next: Array<{ id: string; at: Date }>): Promise<void> {
  const values = sql.join(next.map(({ id, at }) => sql`(${id}, ${at}::timestamptz)`));
  await sql`update automations as a set next_run_at = v.at from (values ${values}) as v(id, at)
            where a.id = v.id and (a.next_run_at is null or a.next_run_at < v.at)`.execute(trx);
}

// ---- runs ----

export function insertRun(db: Database, row: Insertable<AutomationRuns>) {
  return db.insertInto('automation_runs').values(row).returningAll().executeTakeFirstOrThrow();
}

export const { find: findRun } = ownedRecords('automation_runs');

/** The owner's automation runs, filtered; read a page at a time (not their leases). */
export const runList = ownedList('automation_runs', {
  fields: [
    'automation_id',
    'status',
    'trigger',
    'attempt',
    'error_code',
    'error_message',
    'input_tokens',
    'output_tokens',
    'cost_micro_cents',
    'output_ids',
  ],
  times: ['scheduled_for', 'created_at', 'started_at', 'finished_at'],
  filters: { automationId: 'automation_id', status: 'status' },
  closed: ['status'],
});
export type RunView = ListedRecord<'automation_runs', typeof runList>;

export function outputsOf(db: Database, outputIds: string[]) {
  if (outputIds.length === 0) return Promise.resolve([]);
  return db.selectFrom('outputs').select(['id', 'name', 'mime_type', 'size_bytes']).where('id', 'in', outputIds).execute();
}

/**
 * Claims up to `limit` runs to start: queued ones, and running ones whose lease ran out (their
 * instance stopped), oldest first, keeping each user under `perUser` runs at once. Claims are
 * serialized across instances (a transaction-scoped advisory lock), so the per-user count is exact.
 */
export async function claimRuns(trx: Transaction<DB>, now: Date, leaseUntil: Date, token: string, limit: number, perUser: number) {
  await sql`select pg_advisory_xact_lock(hashtext('automation-runs:claim'))`.execute(trx);
  const result = await sql<RunRow>`
    with active as (
      select owner_user_id, count(*)::int as n from automation_runs
      where status = 'running' and locked_until > ${now}
      group by owner_user_id
    ),
    ranked as (
      select r.id, r.created_at,
        coalesce(a.n, 0) + row_number() over (partition by r.owner_user_id order by r.created_at, r.id) as slot
      from automation_runs r left join active a on a.owner_user_id = r.owner_user_id
      where r.status = 'queued' or (r.status = 'running' and r.locked_until <= ${now})
    ),
    picked as (
      select id from automation_runs
      where id in (select id from ranked where slot <= ${perUser} order by created_at, id limit ${limit})
      for update skip locked
    )
    update automation_runs r
    set status = 'running', attempt = r.attempt + 1, locked_until = ${leaseUntil}, lease_token = ${token},
      started_at = coalesce(r.started_at, ${now})
    from picked
    where r.id = picked.id
    returning r.*`.execute(trx);
  return result.rows;
}

/** Extends the lease of a run in progress, if this worker still holds it. */
export async function renewRunLease(db: Database, id: string, token: string, leaseUntil: Date): Promise<void> {
  await db.updateTable('automation_runs').set({ locked_until: leaseUntil }).where('id', '=', id).where('lease_token', '=', token).execute();
}

/** Ends a run, if this worker still holds its lease. */
export async function finishRun(db: Database, id: string, token: string, changes: Updateable<AutomationRuns>): Promise<RunRow | undefined> {
  return db
    .updateTable('automation_runs')
    .set({ ...changes, lease_token: null, locked_until: null })
    .where('id', '=', id)
    .where('lease_token', '=', token)
    .returningAll()
    .executeTakeFirst();
}

/** Runs waiting for a runner, across all users (a metric). */
export async function countQueuedRuns(db: Database): Promise<number> {
  const row = await db
    .selectFrom('automation_runs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('status', '=', 'queued')
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}
