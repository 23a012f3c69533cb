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

/** The lists of a policy row (the deployment's or a group's), as stored in JSON. */
export const listsOf = (row: { allow: unknown; block: unknown }): ModelLists => ({
  allow: (row.allow as string[] | null) ?? null,
  block: (row.block as string[] | null) ?? [],
});

export const POLICY_UPDATE_ACTION = 'administration.model_policy.update';

/** An allow list (null: every model) less a block list: the deployment's policy, or a group's. */
export type ModelLists = Pick<ModelPolicy, 'allow' | 'block'>;

/** The policies that apply to a user: the deployment's, then those of their groups that have one. */
export interface EffectivePolicy {
  deployment: ModelLists;
  /** Empty: the user is in no group with a policy, and the deployment's applies alone. */
  groups: ModelLists[];
}

/** Whether the lists keep a model out: blocked by either of its ids, or allowed by neither. */
export const isBlocked = (policy: ModelLists, modelId: string, providerModelId: string): boolean =>
  policy.block.includes(modelId) ||
  policy.block.includes(providerModelId) ||
  (policy.allow !== null && !policy.allow.includes(modelId) && !policy.allow.includes(providerModelId));

/**
 * Which policy refuses a model to a user, or null: the deployment's first; then, for a user in
 * groups with a policy, the groups' when none of them passes it (groups grant, each on its own).
 */
export function refusedBy(policy: EffectivePolicy, modelId: string, providerModelId: string): 'deployment' | 'groups' | null {
  if (isBlocked(policy.deployment, modelId, providerModelId)) return 'deployment';
  if (policy.groups.length > 0 && policy.groups.every((group) => isBlocked(group, modelId, providerModelId))) return 'groups';
  return null;
}

/** What a caller is told when a policy refuses a model. */
export const REFUSAL_MESSAGE = {
  deployment: "the deployment's model policy blocks this model",
  groups: "your groups' model policies do not allow this model",
} as const;

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

  /**
   * The policies for `userId`: the deployment's (through the cache), and their groups', read
   * from the database each time (a membership or group policy change holds on the next request).
   */
  async effective(userId: string): Promise<EffectivePolicy> {
    const [deployment, groups] = await Promise.all([this.policy(), repo.groupPoliciesOf(this.db, userId)]);
    return { deployment, groups: groups.map(listsOf) };
  }

  async policy(): Promise<ModelPolicy> {
    if (this.cached && this.cached.until > this.now()) return this.cached.policy;
    const row = await repo.findPolicy(this.db);
    const policy: ModelPolicy = row
      ? { ...listsOf(row), updatedAt: row.updated_at, updatedBy: row.updated_by }
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
