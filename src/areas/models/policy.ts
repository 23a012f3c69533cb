import type { Database } from '../../platform/db';
import type { Actor, AuditService } from '../audit/service';
import * as repo from './repository';

/** The deployment's model policy: `allow` (null: every model) less `block`, each naming model ids or providers' model ids. */
export interface ModelPolicy {
  allow: string[] | null;
  block: string[];
  updatedAt: Date | null;
  updatedBy: string | null;
}

export const POLICY_UPDATE_ACTION = 'administration.model_policy.update';

/** Whether the policy keeps a model from everyone: blocked by either of its ids, or allowed by neither. */
export const isBlocked = (policy: ModelPolicy, modelId: string, providerModelId: string): boolean =>
  policy.block.includes(modelId) ||
  policy.block.includes(providerModelId) ||
  (policy.allow !== null && !policy.allow.includes(modelId) && !policy.allow.includes(providerModelId));

export interface ModelPolicyDeps {
  db: Database;
  audit: AuditService;
  /** How long the policy read from the database is reused (every instance agrees within it). */
  cacheMs: number;
  now?: () => number;
}

/** The model policy an administrator sets, read through a short cache. */
export class ModelPolicyService {
  private cached: { policy: ModelPolicy; until: number } | null = null;
  private readonly db: Database;
  private readonly audit: AuditService;
  private readonly cacheMs: number;
  private readonly now: () => number;

  constructor({ db, audit, cacheMs, now = Date.now }: ModelPolicyDeps) {
    this.db = db;
    this.audit = audit;
    this.cacheMs = cacheMs;
    this.now = now;
  }

  async policy(): Promise<ModelPolicy> {
    if (this.cached && this.cached.until > this.now()) return this.cached.policy;
    const row = await repo.findPolicy(this.db);
    const policy: ModelPolicy = row
      ? {
          allow: (row.allow as unknown as string[] | null) ?? null,
          block: (row.block as unknown as string[] | null) ?? [],
          updatedAt: row.updated_at,
          updatedBy: row.updated_by,
        }
      : { allow: null, block: [], updatedAt: null, updatedBy: null };
    this.cached = { policy, until: this.now() + this.cacheMs };
    return policy;
  }

  /** Replaces the lists given, audited in the same transaction; this instance sees it at once. */
  async updatePolicy(actor: Actor, changes: { allow?: string[] | null; block?: string[] }): Promise<ModelPolicy> {
    await this.db.transaction().execute(async (trx) => {
      const row = await repo.upsertPolicy(trx, { ...changes, updatedBy: actor.userId, at: new Date(this.now()) });
      await this.audit.record(
        actor,
        {
          action: POLICY_UPDATE_ACTION,
          resourceType: 'model_policy',
          resourceId: row.id,
          outcome: 'success',
          metadata: { allow: row.allow, block: row.block },
        },
        trx,
      );
    });
    this.cached = null;
    return this.policy();
  }
}
