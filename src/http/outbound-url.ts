import { AddressNotAllowed, type Outbound, UrlNotAllowed } from '../platform/net/outbound';
import { errors } from './errors';

/**
 * Checks a URL a user is saving (a webhook receiver, a model provider connection, an MCP server…)
 * with the outbound guard: a URL the guard refuses is a 400 naming the field (`/body/url`) and
 * why. A name that does not resolve yet is accepted; every request checks it again.
 */
export async function checkUserUrl(outbound: Outbound, url: string, field: string, what = 'URL'): Promise<void> {
  try {
    await outbound.checkTarget(url);
  } catch (error) {
    if (error instanceof UrlNotAllowed || error instanceof AddressNotAllowed) {
      throw errors.invalidRequest(`The ${what} is not allowed.`, [{ path: field, message: error.message }]);
    }
    throw error;
  }
}
