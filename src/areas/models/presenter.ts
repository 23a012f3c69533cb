import type { Schemas } from '../../platform/api-types';
import type { ModelProvider } from '../../platform/ai/models';
import { millis, millisOrNull } from '../../platform/db/timestamps';
import type { ConnectionView, GroupPolicyView } from './repository';
import { discoveredOf, enabledOf } from './connections';
import { listsOf, type ModelPolicy } from './policy';
import type { AvailableModel } from './service';

export function presentModel(model: AvailableModel): Schemas['Model'] {
  return {
    modelId: model.modelId,
    providerId: model.providerId,
    name: model.name,
    default: model.defaultFor.includes('chat'),
    inputCentsPerMillionTokens: model.inputCentsPerMillionTokens,
    outputCentsPerMillionTokens: model.outputCentsPerMillionTokens,
    connectionId: model.connectionId,
    kinds: model.kinds,
    contextWindow: model.contextWindow,
    defaultFor: model.defaultFor,
    ...(model.unitPrice ? { unitPrice: { unit: model.unitPrice.unit, cents: model.unitPrice.microCentsPerUnit / 1e6 } } : {}),
  };
}

/** A provider as clients see it: never its key. */
export function presentProvider(provider: ModelProvider): Schemas['ModelProvider'] {
  return { ...provider.info, models: provider.models.map((m) => m.id) };
}

/** A user's connection as clients see it: never its key (`hasApiKey`). */
export function presentConnection(row: ConnectionView): Schemas['ModelConnection'] {
  return {
    connectionId: row.id,
    kind: row.kind as Schemas['ConnectionKind'],
    name: row.name,
    baseUrl: row.base_url,
    hasApiKey: row.api_key !== null,
    enabledModels: enabledOf(row),
    models: discoveredOf(row).map((m) => m.id),
    status: row.status as Schemas['ModelConnection']['status'],
    lastError: row.last_error,
    lastTestedAt: millisOrNull(row.last_tested_at),
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
  };
}

export function presentPolicy(policy: ModelPolicy): Schemas['ModelPolicy'] {
  return { allow: policy.allow, block: policy.block, updatedAt: policy.updatedAt?.getTime() ?? null, updatedBy: policy.updatedBy };
}

export function presentGroupPolicy(row: GroupPolicyView): Schemas['GroupModelPolicy'] {
  return {
    groupId: row.id,
    ...listsOf(row),
    createdAt: millis(row.created_at),
    updatedAt: millis(row.updated_at),
    updatedBy: row.updated_by,
  };
}
