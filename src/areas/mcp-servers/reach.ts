import { validateHeaderValue } from 'node:http';
import type { RequestInput } from '../../platform/api-types';
import { type ErrorDetail, errors } from '../../platform/errors';
import type { Outbound } from '../../platform/net/outbound';
import type { McpTransportKind } from './client';

type CreateInput = RequestInput<'McpServerCreateRequest'>;

/** The state a server's fields must be consistent in (a create, or an update merged with the row). */
export interface Reach {
  url: string;
  transport: McpTransportKind;
  authentication: string;
  headerName: string | null;
  /** Credentials in clear: new ones, or null when there are none (or they are stored unchanged). */
  credentials: string | null;
  hasCredentials: boolean;
  /** With `oauth`: the configured provider whose connection it uses; null: its own authorization server. */
  integrationId: string | null;
}

/** How a create (or test) request's draft would reach its server, before it is checked. */
export const draftReach = (input: CreateInput): Reach => ({
  url: input.url,
  transport: input.transport,
  authentication: input.authentication ?? 'none',
  headerName: input.headerName ?? null,
  credentials: input.credentials ?? null,
  hasCredentials: input.credentials !== undefined,
  integrationId: input.integrationId ?? null,
});

/** Headers the transports set themselves (or that would change how the exchange is framed). */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'accept',
  'accept-encoding',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'last-event-id',
  'mcp-session-id',
  'mcp-protocol-version',
]);

/** What checking a reach asks: whether an integration is configured, and whether a URL is allowed. */
export interface ReachChecks {
  hasProvider: (integrationId: string) => boolean;
  outbound: Pick<Outbound, 'whyRefused'>;
}

/**
 * `400` naming the field unless the fields of a server's reach are consistent and its URL allowed.
 * `given`: the fields an update gave (the others are the row's, not checked again); `urlChanged`
 * false: the stored URL is kept (it is checked on every request anyway).
 */
export async function checkReach(reach: Reach & { urlChanged?: boolean; given?: Set<string> }, checks: ReachChecks): Promise<Reach> {
  const details: ErrorDetail[] = [];
  const { authentication, headerName, integrationId } = reach;
  if (integrationId !== null && (reach.given === undefined || reach.given.has('integrationId') || reach.given.has('authentication'))) {
    if (authentication !== 'oauth') details.push({ path: '/body/integrationId', message: 'is only allowed with authentication oauth' });
    else if (!checks.hasProvider(integrationId))
      details.push({
        path: '/body/integrationId',
        message: `names no integration this deployment configured (see GET /api/v1/integrations)`,
      });
  }
  if (authentication === 'header') {
    if (headerName === null) details.push({ path: '/body/headerName', message: 'is required with authentication header' });
    else if (RESERVED_HEADERS.has(headerName.toLowerCase()))
      details.push({ path: '/body/headerName', message: `${headerName} is set by the transport itself` });
  } else if (headerName !== null && (reach.given === undefined || reach.given.has('headerName'))) {
    details.push({ path: '/body/headerName', message: 'is only allowed with authentication header' });
  }
  if ((authentication === 'bearer' || authentication === 'header') && !reach.hasCredentials) {
    details.push({ path: '/body/credentials', message: `are required with authentication ${authentication}` });
  }
  if ((authentication === 'none' || authentication === 'oauth') && reach.credentials !== null) {
    details.push({ path: '/body/credentials', message: 'are only allowed with authentication bearer or header' });
  } else if (reach.credentials !== null) {
    const problem = credentialsProblem(reach.credentials);
    if (problem) details.push({ path: '/body/credentials', message: problem });
  }
  if (reach.urlChanged !== false) {
    const refused = await checks.outbound.whyRefused(reach.url);
    if (refused) details.push({ path: '/body/url', message: refused });
  }
  if (details.length > 0) throw errors.invalidRequest('The MCP server as given is not valid.', details);
  return {
    ...reach,
    headerName: authentication === 'header' ? headerName : null,
    integrationId: authentication === 'oauth' ? integrationId : null,
  };
}

/**
 * Why credentials cannot be sent as the value of an HTTP header (null: they can). Node's own check
 * refuses CR, LF, the other control characters but tab, and characters past U+00FF; a leading or
 * trailing space or tab would be trimmed on the way, so the server would get other credentials.
 */
function credentialsProblem(credentials: string): string | null {
  try {
    validateHeaderValue('credentials', credentials);
  } catch {
    return 'must be usable as an HTTP header value: no CR, LF or other control character (tab aside), and no character past U+00FF';
  }
  if (/^[\t ]|[\t ]$/.test(credentials)) return 'must not start or end with a space or tab (an HTTP header value loses them)';
  return null;
}
