import type { HandlerMap } from '../../http/handler';
import type { ModelProvider } from '../../platform/ai/models';
import { presentModel, presentProvider } from './presenter';

export function modelHandlers(provider: ModelProvider): Pick<HandlerMap, 'getModels' | 'getModelProviders'> {
  return {
    getModels: async () => ({ models: provider.models.map(presentModel) }),
    getModelProviders: async () => ({ providers: [presentProvider(provider)] }),
  };
}
