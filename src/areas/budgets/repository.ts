import type { Insertable, Updateable } from 'kysely';
import type { Budgets, LedgerEntries } from '../../../generated/db';
import type { PageRequest } from '../../http/pagination';
import type { Database } from '../../platform/db';

export function findBudget(db: Database, userId: string) {
  return db.selectFrom('budgets').selectAll().where('user_id', '=', userId).executeTakeFirst();
}

/** The budget row, created at zero if missing, locked until the transaction ends. */
export async function lockBudget(db: Database, userId: string) {
  await db
    .insertInto('budgets')
    .values({ user_id: userId, balance_cents: 0, updated_at: new Date() })
    .onConflict((oc) => oc.column('user_id').doNothing())
    .execute();
  return db.selectFrom('budgets').selectAll().where('user_id', '=', userId).forUpdate().executeTakeFirstOrThrow();
}

export function updateBudget(db: Database, userId: string, patch: Updateable<Budgets>) {
  return db
    .updateTable('budgets')
    .set(patch)
    .where('user_id', '=', userId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function insertLedgerEntry(db: Database, row: Insertable<LedgerEntries>) {
  return db.insertInto('ledger_entries').values(row).returningAll().executeTakeFirstOrThrow();
}

export function findLedgerEntryByReference(db: Database, reference: string) {
  return db.selectFrom('ledger_entries').select('id').where('reference', '=', reference).executeTakeFirst();
}

export function listLedgerEntries(db: Database, userId: string, page: PageRequest) {
  let query = db.selectFrom('ledger_entries').selectAll().where('user_id', '=', userId);
  if (page.beforeId !== null) query = query.where('id', '<', page.beforeId);
  return query.orderBy('id', 'desc').limit(page.limit + 1).execute();
}
