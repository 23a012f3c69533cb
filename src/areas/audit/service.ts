import type { Selectable } from 'kysely';
import type { AuditEvents } from '../../../generated/db';
import type { Schemas } from '../../platform/api-types';
import type { Database } from '../../platform/db';
import { uuidv7 } from '../../platform/ids';
import * as repo from './repository';

export type AuditFilter = repo.AuditFilter;

/** Who acts, and the request it came in with: what every recorded event is attributed to. */
export interface Actor {
  userId: string;
  requestId: string | null;
}

export interface AuditRecord {
  action: string;
  resourceType: string;
  resourceId?: string | null;
  outcome: Schemas['AuditOutcome'];
  metadata?: Record<string, unknown>;
}

const EXPORT_BATCH = 1000;

/** The append-only audit log. `record` takes the caller's transaction, so an event commits with its change. */
export class AuditService {
  constructor(private readonly db: Database) {}

  async record(actor: Actor, event: AuditRecord, db: Database = this.db): Promise<void> {
    const now = new Date();
    await repo.insertAuditEvent(db, {
      id: uuidv7(now.getTime()),
      action: event.action,
      actor_user_id: actor.userId,
      resource_type: event.resourceType,
      resource_id: event.resourceId ?? null,
      outcome: event.outcome,
      request_id: actor.requestId,
      metadata: JSON.stringify(event.metadata ?? {}),
      created_at: now,
    });
  }

  /** One page, newest first, and the `before` of the next page. */
  async list(filter: AuditFilter, page: { limit: number; before: string | null }) {
    const rows = await repo.listAuditEvents(this.db, filter, page.before, page.limit + 1);
    const events = rows.slice(0, page.limit);
    const last = events[events.length - 1];
    return { events, nextBefore: rows.length > page.limit && last ? last.id : null };
  }

  /** Every matching event, newest first, in batches: memory stays flat however long the log is. */
  async *exportBatches(filter: AuditFilter): AsyncGenerator<Selectable<AuditEvents>[]> {
    let before: string | null = null;
    for (;;) {
      const batch = await repo.listAuditEvents(this.db, filter, before, EXPORT_BATCH);
      if (batch.length === 0) return;
      yield batch;
      if (batch.length < EXPORT_BATCH) return;
      before = (batch[batch.length - 1] as Selectable<AuditEvents>).id;
    }
  }
}
