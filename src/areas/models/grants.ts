import type { ModelProvider } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import type { GrantableKind, GrantCaller } from '../grants/service';
import * as repo from './repository';

export interface ModelGrantDeps {
  db: Database;
  /** The deployment's provider: its chat and media models are the `model` resources. */
  deployment: ModelProvider;
  /** The model id of the deployment's embedder (on /v1), a `model` resource too. */
  embedderId: string;
  /** Whether the caller acts as an admin (the role, with credentials that carry the `admin` scope). */
  isAdmin: (caller: GrantCaller) => Promise<boolean>;
}

/**
 * How kinds `model` and `connection` are shared (`use` only): admins share the deployment's models
 * and their own connections; a resource that does not exist, and anyone else, is 'none' (404). A
 * model or connection with a `use` grant is callable by its grantees only (and a connection's owner).
 */
export function modelGrantKinds({ db, deployment, embedderId, isAdmin }: ModelGrantDeps): Record<'model' | 'connection', GrantableKind> {
  const deploymentModel = (id: string) =>
    id === embedderId || deployment.models.some((m) => m.id === id) || (deployment.media?.models ?? []).some((m) => m.id === id);
  return {
    model: {
      permissions: ['use'],
      standing: async (caller, modelId) => (deploymentModel(modelId) && (await isAdmin(caller)) ? 'manage' : 'none'),
    },
    connection: {
      permissions: ['use'],
      // Connections are their owners' (no one else sees one): an admin shares their own.
      standing: async (caller, connectionId) =>
        (await isAdmin(caller)) && (await repo.findConnection(db, caller.userId, connectionId)) ? 'manage' : 'none',
    },
  };
}
