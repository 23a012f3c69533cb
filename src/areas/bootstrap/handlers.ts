import { type HandlerMap, tagged } from '../../http/handler';
import { presentBootstrap } from './presenter';
import type { BootstrapService } from './service';

export function bootstrapHandlers(bootstrap: BootstrapService): Pick<HandlerMap, 'getBootstrap'> {
  return {
    // Tagged: a strong ETag over the body, and 304 when If-None-Match names it.
    getBootstrap: async ({ caller }) => tagged({ bootstrap: presentBootstrap(await bootstrap.load(caller.userId)) }),
  };
}
