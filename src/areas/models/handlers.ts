import type { HandlerMap } from '../../http/handler';
import type { ModelProvider } from '../../platform/ai/models';

export function modelHandlers(provider: ModelProvider): Pick<HandlerMap, 'getModels' | 'getModelProviders'> {
  return {
    getModels: async () => ({
      models: provider.models.map((m) => ({
        modelId: m.id,
        providerId: m.providerId,
        name: m.name,
        default: m.default,
        inputCentsPerMillionTokens: m.inputCentsPerMillionTokens,
        outputCentsPerMillionTokens: m.outputCentsPerMillionTokens,
      })),
    }),
    getModelProviders: async () => ({
      providers: [{ ...provider.info, models: provider.models.map((m) => m.id) }],
    }),
  };
}
