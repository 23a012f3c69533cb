import type { HandlerMap, PublicHandler } from '../../http/handler';
import { presentDiscovery } from './presenter';
import type { DiscoveryService } from './service';

/** How long clients and shared caches may reuse the answer. */
const CACHE_CONTROL = 'public, max-age=60';

export function discoveryHandlers(discovery: DiscoveryService): Pick<HandlerMap, 'getDiscovery'> {
  const getDiscovery: PublicHandler<'getDiscovery'> = async ({ res }) => {
    res.setHeader('Cache-Control', CACHE_CONTROL);
    return { discovery: presentDiscovery(await discovery.describe()) };
  };
  return { getDiscovery };
}
