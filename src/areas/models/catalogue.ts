import { type ConnectionKind, type ModelKind, modelKinds } from '../../platform/ai/connections';
import { type MediaUnit, UNIT_OF } from '../../platform/ai/media';
import type { ModelProvider } from '../../platform/ai/models';
import type { Database } from '../../platform/db';
import type { CapabilityService } from '../capabilities/service';
import { discoveredOf, enabledOf } from './connections';
import { type EffectivePolicy, type ModelPolicyService, REFUSAL_MESSAGE, refusedBy } from './policy';
import * as repo from './repository';

/** A model of the deployment or of one of a user's connections. */
export interface CatalogueModel {
  /** What `model` fields name: the deployment's model id, or `<connectionId>/<provider's model id>`. */
  modelId: string;
  /** The id the provider knows the model by. */
  providerModelId: string;
  providerId: string;
  name: string;
  connectionId: string | null;
  kinds: ModelKind[];
  contextWindow: number | null;
  inputCentsPerMillionTokens: number;
  outputCentsPerMillionTokens: number;
  /** A deployment's media model's price per unit (millionths of a cent). */
  unitPrice?: { unit: MediaUnit; microCentsPerUnit: number };
}

/** What deciding whether a user may use a model reads, read at once (`ModelCatalogue.read`). */
export interface Catalogue {
  /**
   * Every model of the deployment and of the connections the user may call through, before the
   * policy; the deployment's private models (those with grants) only when granted to the user.
   */
  entries: Array<{ model: CatalogueModel; byokEnabled: boolean }>;
  /** The connections read for it (the user's own and those granted to them), by id. */
  connections: Map<string, repo.ConnectionRow>;
  policy: EffectivePolicy;
}

/**
 * Why a model cannot be used for a kind; `gone`: it is unknown, rather than refused. `reason`:
 * unknown (`gone`), a connection's while `byok` is off, blocked by the policy, or not of the kind.
 */
export interface ModelProblem {
  message: string;
  gone: boolean;
  reason: 'unknown' | 'byok_disabled' | 'policy' | 'kind';
}

/** The models of `catalogue` the user may call: the deployment's, and their connections' while `byok` is on, less the policy's. */
export function usableIn(catalogue: Catalogue): CatalogueModel[] {
  return catalogue.entries
    .filter(({ model, byokEnabled }) => model.connectionId === null || byokEnabled)
    .map(({ model }) => model)
    .filter((m) => refusedBy(catalogue.policy, m.modelId, m.providerModelId) === null);
}

/** Why `modelId` cannot be used for `kind`, or null. */
export function problemIn(catalogue: Catalogue, modelId: string, kind: ModelKind): ModelProblem | null {
  const entry = catalogue.entries.find(({ model }) => model.modelId === modelId);
  if (!entry) {
    const names = usableIn(catalogue)
      .filter((m) => m.kinds.includes(kind))
      .map((m) => m.modelId);
    return { message: `must be one of the available models: ${names.join(', ')}`, gone: true, reason: 'unknown' };
  }
  if (entry.model.connectionId !== null && !entry.byokEnabled)
    return {
      message: 'model provider connections (bring your own key) are disabled for this deployment',
      gone: false,
      reason: 'byok_disabled',
    };
  const refusal = refusedBy(catalogue.policy, entry.model.modelId, entry.model.providerModelId);
  if (refusal) return { message: REFUSAL_MESSAGE[refusal], gone: false, reason: 'policy' };
  if (!entry.model.kinds.includes(kind)) return { message: `is not a ${kind} model`, gone: false, reason: 'kind' };
  return null;
}

export interface ModelCatalogueDeps {
  db: Database;
  /** The deployment's provider (configured by the operator). */
  deployment: ModelProvider;
  capabilities: Pick<CapabilityService, 'isEnabled'>;
  policy: Pick<ModelPolicyService, 'effective'>;
}

/**
 * The models there are for a user: the deployment's (chat models priced per token, media models
 * per unit) and their own connections' (the enabled models, else all those discovered), with the
 * model policy that applies to them.
 */
export class ModelCatalogue {
  private readonly db: Database;
  private readonly deployment: ModelProvider;
  private readonly capabilities: Pick<CapabilityService, 'isEnabled'>;
  private readonly policy: Pick<ModelPolicyService, 'effective'>;

  constructor({ db, deployment, capabilities, policy }: ModelCatalogueDeps) {
    this.db = db;
    this.deployment = deployment;
    this.capabilities = capabilities;
    this.policy = policy;
  }

  /** The models the user may call, the deployment's first. */
  async available(userId: string): Promise<CatalogueModel[]> {
    return usableIn(await this.read(userId, false));
  }

  /**
   * Reads the catalogue and the policies that apply to the user in parallel. Connection models
   * are left out while `byok` is off, unless `withDisabled` (to say why one is refused).
   */
  async read(userId: string, withDisabled: boolean): Promise<Catalogue> {
    const [{ entries, connections }, policy] = await Promise.all([this.entries(userId, withDisabled), this.policy.effective(userId)]);
    return { entries, connections, policy };
  }

  /** Why `userId` may not call `modelId`, a deployment model outside the catalogue (its embedder), or null. */
  async refusalOutside(userId: string, modelId: string): Promise<string | null> {
    const [policy, hidden] = await Promise.all([this.policy.effective(userId), repo.hiddenModelIds(this.db, userId)]);
    if (hidden.includes(modelId)) return 'is not available';
    const refusal = refusedBy(policy, modelId, modelId);
    return refusal && REFUSAL_MESSAGE[refusal];
  }

  private async entries(userId: string, withDisabled: boolean): Promise<Pick<Catalogue, 'entries' | 'connections'>> {
    const [byokEnabled, hidden] = await Promise.all([
      this.capabilities.isEnabled('byok'),
      repo.hiddenModelIds(this.db, userId).then((ids) => new Set(ids)),
    ]);
    const ofDeployment = (m: { id: string; providerId: string; name: string }, kind: ModelKind, price: Partial<CatalogueModel>) => ({
      byokEnabled,
      model: {
        modelId: m.id,
        providerModelId: m.id,
        providerId: m.providerId,
        name: m.name,
        connectionId: null,
        kinds: [kind],
        contextWindow: null,
        inputCentsPerMillionTokens: 0,
        outputCentsPerMillionTokens: 0,
        ...price,
      },
    });
    const deployment = [
      ...this.deployment.models
        .filter((m) => !hidden.has(m.id))
        .map((m) =>
          ofDeployment(m, 'chat', {
            inputCentsPerMillionTokens: m.inputCentsPerMillionTokens,
            outputCentsPerMillionTokens: m.outputCentsPerMillionTokens,
            // A chat model that reads images is a `vision` model too.
            ...(m.vision ? { kinds: ['chat', 'vision'] as ModelKind[] } : {}),
          }),
        ),
      ...(this.deployment.media?.models ?? [])
        .filter((m) => !hidden.has(m.id))
        .map((m) => ofDeployment(m, m.kind, { unitPrice: { unit: UNIT_OF[m.kind], microCentsPerUnit: m.microCentsPerUnit } })),
    ];
    if (!byokEnabled && !withDisabled) return { entries: deployment, connections: new Map() };
    const connections = await repo.usableConnections(this.db, userId);
    const own = connections
      .flatMap((row) => {
        const discovered = discoveredOf(row);
        const enabled = enabledOf(row);
        const ids = enabled.length > 0 ? enabled : discovered.map((m) => m.id);
        return ids.map((id) => ({
          byokEnabled,
          model: {
            modelId: `${row.id}/${id}`,
            providerModelId: id,
            providerId: row.kind,
            name: id,
            connectionId: row.id,
            // A connection shared with the user serves chat and media; its embeddings stay its owner's
            // (the knowledge index embeds each owner's records with the owner's own connection).
            kinds: modelKinds(row.kind as ConnectionKind, id).filter((kind) => row.owner_user_id === userId || kind !== 'embeddings'),
            contextWindow: discovered.find((m) => m.id === id)?.contextWindow ?? null,
            inputCentsPerMillionTokens: 0,
            outputCentsPerMillionTokens: 0,
          },
        }));
      })
      .filter((entry) => entry.model.kinds.length > 0);
    return { entries: [...deployment, ...own], connections: new Map(connections.map((row) => [row.id, row])) };
  }
}
