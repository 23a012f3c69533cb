import type { AuditService } from '../areas/audit/service';
import { QuotaService } from '../areas/quotas/service';
import type { WebhookService } from '../areas/webhooks/service';
import type { Config } from '../config';
import type { Database } from '../platform/db';

/** What a reservation outlives besides its call: the charge's write, tried again while the database is away. */
const WRITE_MARGIN_MS = 60_000;

/**
 * The spending quotas. A reservation expires after the longest a charged call may take (a chat
 * or media call, an automation's run) and a margin: only one left by a stopped instance expires.
 */
export function createQuotas(config: Config, db: Database, audit: AuditService, webhooks: WebhookService): QuotaService {
  const longest = Math.max(config.models.timeoutMs, config.media.timeoutMs, config.automations.runTimeoutMs);
  return new QuotaService({ db, audit, webhooks, reservationTtlMs: longest + WRITE_MARGIN_MS });
}
