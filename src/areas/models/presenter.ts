import type { components } from '../../../generated/api';
import type { ModelInfo, ModelProvider } from '../../platform/ai/models';

type Schemas = components['schemas'];

export function presentModel(model: ModelInfo): Schemas['Model'] {
  return {
    modelId: model.id,
    providerId: model.providerId,
    name: model.name,
    default: model.default,
    inputCentsPerMillionTokens: model.inputCentsPerMillionTokens,
    outputCentsPerMillionTokens: model.outputCentsPerMillionTokens,
  };
}

/** A provider as clients see it: never its key. */
export function presentProvider(provider: ModelProvider): Schemas['ModelProvider'] {
  return { ...provider.info, models: provider.models.map((m) => m.id) };
}
