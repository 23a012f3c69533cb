import type { AuditService } from '../areas/audit/service';
import type { FileService } from '../areas/files/service';
import { type GrantableKind, type GrantCaller, GrantService } from '../areas/grants/service';
import { GroupService } from '../areas/groups/service';
import { modelGrantKinds } from '../areas/models/grants';
import { GroupModelPolicyService } from '../areas/models/group-policy';
import type { PrincipalService } from '../areas/principals/service';
import type { ProjectService } from '../areas/projects/service';
import type { SkillService } from '../areas/skills/service';
import type { Config } from '../config';
import type { ModelProvider } from '../platform/ai/models';
import type { Database } from '../platform/db';
import type { Permission } from '../platform/db/access';
import type { OnVerified } from '../platform/tokens';
import { deploymentEmbedderId } from './derived';

/**
 * Teams (DESIGN section 21): the deployment's groups, the access grants that share resources with
 * users and groups, the groups' model policies, and the identity provider's groups claim.
 */
export interface Teams {
  groups: GroupService;
  grants: GrantService;
  /** The model policies admins give groups. */
  groupModelPolicies: GroupModelPolicyService;
  /** Matches a verified token's groups claim (AUTH_GROUPS_CLAIM) to its user's memberships; unset without the setting. */
  onTokenVerified?: OnVerified;
}

export interface TeamsDeps {
  config: Config;
  db: Database;
  audit: AuditService;
  principals: PrincipalService;
  files: FileService;
  projects: ProjectService;
  skills: SkillService;
  /** The deployment's provider, whose models admins share. */
  deployment: ModelProvider;
}

/** A kind its owner shares: `ownerOf` answers for a resource the caller can see, undefined for one they cannot. */
function ownedKind(
  permissions: readonly Permission[],
  ownerOf: (userId: string, id: string) => Promise<string | undefined>,
): GrantableKind {
  return {
    permissions,
    async standing(caller, id) {
      const owner = await ownerOf(caller.userId, id);
      if (owner === undefined) return 'none';
      return owner === caller.userId ? 'manage' : 'visible';
    },
  };
}

export function createTeams({ config, db, audit, principals, files, projects, skills, deployment }: TeamsDeps): Teams {
  const groups = new GroupService(db, audit);
  // An admin acts as one only with credentials that carry the `admin` scope.
  const isAdmin = async (caller: GrantCaller) =>
    (caller.scopes === undefined || caller.scopes.includes('admin')) && (await principals.roles(caller.userId)).includes('admin');
  const grants = new GrantService(db, groups, isAdmin, {
    file: ownedKind(['read'], (userId, id) => files.ownerOf(userId, id)),
    project: ownedKind(['read'], (userId, id) => projects.ownerOf(userId, id)),
    skill: ownedKind(['read', 'use', 'edit'], (userId, id) => skills.ownerOf(userId, id)),
    ...modelGrantKinds({ db, deployment, embedderId: deploymentEmbedderId(config), isAdmin }),
  });
  const claim = config.auth.groupsClaim;
  return {
    groups,
    grants,
    groupModelPolicies: new GroupModelPolicyService(db, audit),
    ...(claim !== null ? { onTokenVerified: (userId, payload) => groups.syncClaim(userId, payload[claim]) } : {}),
  };
}
