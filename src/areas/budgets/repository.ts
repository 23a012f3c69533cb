import type { Selectable, Updateable } from 'kysely';
import type { Budgets } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { epochMs } from '../../platform/db/timestamps';
import { uuidv7 } from '../../platform/ids';

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
  return db.updateTable('budgets').set(patch).where('user_id', '=', userId).returningAll().executeTakeFirstOrThrow();
}

/** A change of a balance, as its ledger entry records it. */
export interface Posting {
  amountCents: number;
  kind: 'adjustment' | 'usage' | 'top_up';
  actorUserId: string;
  reason: string;
  /** Unique per cause (a payment, a charged action), when it has one. */
  reference?: string;
  at: Date;
}

/**
 * Moves a locked budget's balance and writes the ledger entry that says so (with any other budget
 * fields in `patch`): the one way a balance changes, so the ledger always adds up to it.
 */
export async function post(db: Database, budget: Selectable<Budgets>, posting: Posting, patch: Updateable<Budgets> = {}) {
  const balance = budget.balance_cents + posting.amountCents;
  const updated = await updateBudget(db, budget.user_id, { ...patch, balance_cents: balance, updated_at: posting.at });
  const entry = await db
    .insertInto('ledger_entries')
    .values({
      id: uuidv7(posting.at.getTime()),
      user_id: budget.user_id,
      amount_cents: posting.amountCents,
      balance_after_cents: balance,
      kind: posting.kind,
      actor_user_id: posting.actorUserId,
      reason: posting.reason,
      reference: posting.reference ?? null,
      created_at: posting.at,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { budget: updated, entry };
}

export function findLedgerEntryByReference(db: Database, reference: string) {
  return db.selectFrom('ledger_entries').select('id').where('reference', '=', reference).executeTakeFirst();
}

/** What a ledger entry is presented with: the list reads these, and its time as epoch milliseconds. */
const LEDGER_FIELDS = ['id', 'user_id', 'amount_cents', 'balance_after_cents', 'kind', 'actor_user_id', 'reason'] as const;

/** A user's ledger entries; read a page at a time. */
export const ledgerEntryList = listQuery({
  id: 'id',
  rows: (db, { userId }: { userId: string }) =>
    db
      .selectFrom('ledger_entries')
      .select([...LEDGER_FIELDS, epochMs('created_at')])
      .where('user_id', '=', userId),
});
export type LedgerEntryView = ListedRecord<'ledger_entries', typeof ledgerEntryList>;
