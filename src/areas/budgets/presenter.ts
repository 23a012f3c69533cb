import type { Selectable } from 'kysely';
import type { components } from '../../../generated/api';
import type { Budgets } from '../../../generated/db';
import { millis } from '../../platform/db/timestamps';
import type { LedgerEntryView } from './repository';

type Schemas = components['schemas'];

export function presentBudget(userId: string, row: Selectable<Budgets> | undefined): Schemas['Budget'] {
  return { userId, balanceCents: row?.balance_cents ?? 0, updatedAt: row ? row.updated_at.getTime() : null };
}

export function presentLedgerEntry(row: LedgerEntryView): Schemas['LedgerEntry'] {
  return {
    entryId: row.id,
    userId: row.user_id,
    amountCents: row.amount_cents,
    balanceAfterCents: row.balance_after_cents,
    kind: row.kind as Schemas['LedgerEntry']['kind'],
    actorUserId: row.actor_user_id,
    reason: row.reason,
    createdAt: millis(row.created_at),
  };
}
