import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Which URLs the outbound guard (outbound.ts) lets a request go to: the checks of the URL itself,
 * and the resolution of its host to addresses that must all be public unicast ones.
 */

/** What the guard allows besides public addresses on the schemes' default ports. */
export interface OutboundPolicy {
  /** Lets loopback addresses (on any port) through: tests and local development only. */
  allowLoopback: boolean;
  /** Ports allowed besides the scheme's default one. */
  allowedPorts: readonly number[];
}

/** The URL itself is not acceptable (scheme, port, credentials…); `message` says why. */
export class UrlNotAllowed extends Error {
  override name = 'UrlNotAllowed';
}

/** The host is, or resolves to, an address outside the public internet. */
export class AddressNotAllowed extends Error {
  override name = 'AddressNotAllowed';
  constructor(
    readonly host: string,
    readonly address: string,
    readonly range: string,
  ) {
    super(host === address ? `${address} is a ${range} address` : `${host} resolves to ${address}, a ${range} address`);
  }
}

/** The host name could not be resolved. */
export class HostNotResolved extends Error {
  override name = 'HostNotResolved';
}

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');
export const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

/**
 * The kind of an address: `unicast` for a public one, otherwise the reserved range it is in
 * (`loopback`, `private`, `linkLocal`, `uniqueLocal`, `multicast`, `unspecified`,
 * `carrierGradeNat`, `reserved`…). IPv4-mapped IPv6 addresses are judged as the IPv4 address they
 * carry; IPv6 must also be global unicast (2000::/3), which rules out IPv4-compatible and NAT64
 * forms. Cloud metadata endpoints (169.254.169.254, fd00:ec2::254, 100.100.100.200, 192.0.0.192)
 * fall in link-local, unique-local, shared and reserved ranges.
 */
export function addressRange(address: string): string {
  const parsed = ipaddr.process(address);
  const range = parsed.range();
  if (range === 'unicast' && parsed.kind() === 'ipv6' && !(parsed as ipaddr.IPv6).match(GLOBAL_UNICAST_V6)) return 'reserved';
  return range;
}

function allowed(address: string, policy: OutboundPolicy): { ok: true } | { ok: false; range: string } {
  const range = addressRange(address);
  if (range === 'unicast' || (range === 'loopback' && policy.allowLoopback)) return { ok: true };
  return { ok: false, range };
}

/**
 * Parses and checks the parts of a URL that need no network: http(s), no credentials or fragment,
 * the default port (or an allowed one; any port on loopback when loopback is allowed), and, for
 * an IP literal, the address itself. Throws UrlNotAllowed or AddressNotAllowed.
 */
export function checkUrl(raw: string, policy: OutboundPolicy): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UrlNotAllowed('must be an absolute http or https URL');
  }
  if (!(url.protocol in DEFAULT_PORTS)) throw new UrlNotAllowed('must use http or https');
  if (url.username || url.password) throw new UrlNotAllowed('must not contain credentials');
  if (url.hash) throw new UrlNotAllowed('must not contain a fragment');
  const host = hostOf(url);
  if (isIP(host)) {
    const verdict = allowed(host, policy);
    if (!verdict.ok) throw new AddressNotAllowed(host, host, verdict.range);
  }
  if (!portAllowed(url, policy)) {
    // With loopback allowed, a name may still resolve to loopback: resolveTarget judges it then.
    const loopback = isIP(host) ? addressRange(host) === 'loopback' : true;
    if (!(policy.allowLoopback && loopback)) throw portNotAllowed(url);
  }
  return url;
}

/** The default port of the scheme, or one of the allowed ports (loopback aside). */
function portAllowed(url: URL, policy: OutboundPolicy): boolean {
  return url.port === '' || policy.allowedPorts.includes(Number(url.port));
}

function portNotAllowed(url: URL): UrlNotAllowed {
  return new UrlNotAllowed(`must use the default port of ${url.protocol.slice(0, -1)} (port ${url.port} is not allowed)`);
}

/** The host of a URL without the brackets of an IPv6 literal. */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** Resolves a host name to all its addresses (replaceable in tests). */
export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

export const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true });

export interface ResolvedTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

/**
 * Checks the URL and resolves its host: every address the name resolves to must be allowed
 * (a name with one public and one private address is refused). Throws UrlNotAllowed,
 * AddressNotAllowed or HostNotResolved.
 */
export async function resolveTarget(
  raw: string,
  policy: OutboundPolicy,
  timeoutMs: number,
  resolver: Resolver = systemResolver,
): Promise<ResolvedTarget> {
  const url = checkUrl(raw, policy);
  const host = hostOf(url);
  const family = isIP(host);
  if (family) return { url, address: ipaddr.process(host).toString(), family: ipaddr.process(host).kind() === 'ipv4' ? 4 : 6 };
  let timer: NodeJS.Timeout | undefined;
  let addresses: { address: string; family: number }[];
  try {
    addresses = await Promise.race([
      resolver(host),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new HostNotResolved(`${host} did not resolve within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (error) {
    if (error instanceof HostNotResolved) throw error;
    throw new HostNotResolved(`${host} does not resolve (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  } finally {
    clearTimeout(timer);
  }
  if (addresses.length === 0) throw new HostNotResolved(`${host} does not resolve`);
  for (const { address } of addresses) {
    const verdict = allowed(address, policy);
    if (!verdict.ok) throw new AddressNotAllowed(host, address, verdict.range);
  }
  if (!portAllowed(url, policy) && addresses.some(({ address }) => addressRange(address) !== 'loopback')) throw portNotAllowed(url);
  const first = addresses[0] as { address: string; family: number };
  return { url, address: ipaddr.process(first.address).toString(), family: ipaddr.process(first.address).kind() === 'ipv4' ? 4 : 6 };
}
