import type { ModelProvider } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import type { Permission } from '../../platform/db/access';
import type { Actor } from '../audit/service';
import type { PrincipalService } from '../principals/service';
import * as repo from './repository';

/** Who may manage the grants of one resource: 'none' is answered 404, 'visible' 403 (the grants API's resolver). */
export type GrantStanding = 'manage' | 'visible' | 'none';

/** What the grants API asks of a kind of resource: the permissions it has, and the actor's standing on one. */
export interface GrantResolver {
  permissions: Permission[];
  manage(actor: Actor, resourceId: string): Promise<GrantStanding>;
}

export interface ModelGrantDeps {
  db: Database;
  /** The deployment's provider: its chat and media models are the `model` resources. */
  deployment: ModelProvider;
  principals: Pick<PrincipalService, 'roles'>;
}

/**
 * The resolvers of kinds `model` and `connection`: admins share the deployment's models and their
 * own connections (`use`); a resource that does not exist, or anyone else, is 'none'. A model or
 * connection with a `use` grant is callable by its grantees only (besides a connection's owner).
 */
export function modelGrantResolvers({ db, deployment, principals }: ModelGrantDeps): Record<'model' | 'connection', GrantResolver> {
  const isAdmin = async (actor: Actor) => (await principals.roles(actor.userId)).includes('admin');
  const deploymentModel = (id: string) =>
    deployment.models.some((m) => m.id === id) || (deployment.media?.models ?? []).some((m) => m.id === id);
  return {
    model: {
      permissions: ['use'],
      manage: async (actor, modelId) => (deploymentModel(modelId) && (await isAdmin(actor)) ? 'manage' : 'none'),
    },
    connection: {
      permissions: ['use'],
      // Connections are their owners' (no one else sees one): an admin shares their own.
      manage: async (actor, connectionId) =>
        (await isAdmin(actor)) && (await repo.findConnection(db, actor.userId, connectionId)) ? 'manage' : 'none',
    },
  };
}
