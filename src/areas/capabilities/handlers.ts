import type { HandlerMap } from '../../http/handler';
import type { CapabilityService } from './service';

export function capabilityHandlers(capabilities: CapabilityService): Pick<HandlerMap, 'getCapabilities'> {
  return {
    getCapabilities: async () => ({ capabilities: await capabilities.current() }),
  };
}
