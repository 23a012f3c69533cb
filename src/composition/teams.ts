import type { AuditService } from '../areas/audit/service';
import type { GroupService } from '../areas/groups/service';
import { type GrantResolver, modelGrantResolvers } from '../areas/models/grants';
import { GroupModelPolicyService } from '../areas/models/group-policy';
import type { PrincipalService } from '../areas/principals/service';
import type { Config } from '../config';
import type { ModelProvider } from '../platform/ai/models';
import type { Database } from '../platform/db';
import type { OnVerified } from '../platform/tokens';

/** What teams add beside groups (DESIGN section 21): the groups' model policies, the models' grant resolvers, the groups claim. */
export interface Teams {
  /** The model policies admins give groups. */
  groupModelPolicies: GroupModelPolicyService;
  /** Who may grant the deployment's models and connections (kinds `model`, `connection`). */
  modelGrantResolvers: Record<'model' | 'connection', GrantResolver>;
  /** Matches a verified token's groups claim (AUTH_GROUPS_CLAIM) to its user's memberships; unset without the setting. */
  onTokenVerified?: OnVerified;
}

export interface TeamsDeps {
  config: Config;
  db: Database;
  audit: AuditService;
  principals: PrincipalService;
  groups: GroupService;
  deployment: ModelProvider;
}

export function createTeams({ config, db, audit, principals, groups, deployment }: TeamsDeps): Teams {
  const claim = config.auth.groupsClaim;
  return {
    groupModelPolicies: new GroupModelPolicyService(db, audit),
    modelGrantResolvers: modelGrantResolvers({ db, deployment, principals }),
    ...(claim !== null ? { onTokenVerified: (userId, payload) => groups.syncClaim(userId, payload[claim]) } : {}),
  };
}
