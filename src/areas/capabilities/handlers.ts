import type { HandlerMap } from '../../http/handler';
import type { CapabilityService } from './service';

export function capabilityHandlers(capabilities: CapabilityService): Pick<HandlerMap, 'getCapabilities' | 'updateCapabilities'> {
  return {
    getCapabilities: async () => ({ capabilities: await capabilities.current() }),
    updateCapabilities: async ({ actor, body }) => ({ capabilities: await capabilities.update(actor, body) }),
  };
}
