import { lookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Requests to addresses a user chose (webhook receivers), guarded against server-side request
 * forgery: the host is resolved here, every address it resolves to must be a public unicast one,
 * and the connection goes to the address that was checked (the name is never resolved again, so a
 * second DNS answer cannot point it elsewhere). Redirects are never followed.
 */
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
const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

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
  if (url.username || url.password) throw new UrlNotAllowed('must not contain credentials (receivers verify the signature instead)');
  if (url.hash) throw new UrlNotAllowed('must not contain a fragment');
  const host = hostOf(url);
  if (isIP(host)) {
    const verdict = allowed(host, policy);
    if (!verdict.ok) throw new AddressNotAllowed(host, host, verdict.range);
  }
  if (url.port !== '' && !policy.allowedPorts.includes(Number(url.port))) {
    const loopback = isIP(host) && addressRange(host) === 'loopback';
    if (!(policy.allowLoopback && (loopback || host === 'localhost'))) {
      throw new UrlNotAllowed(`must use the default port of ${url.protocol.slice(0, -1)} (port ${url.port} is not allowed)`);
    }
  }
  return url;
}

/** The host of a URL without the brackets of an IPv6 literal. */
function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

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
export async function resolveTarget(raw: string, policy: OutboundPolicy, timeoutMs: number): Promise<ResolvedTarget> {
  const url = checkUrl(raw, policy);
  const host = hostOf(url);
  const family = isIP(host);
  if (family) return { url, address: ipaddr.process(host).toString(), family: ipaddr.process(host).kind() === 'ipv4' ? 4 : 6 };
  let timer: NodeJS.Timeout | undefined;
  let addresses: { address: string; family: number }[];
  try {
    addresses = await Promise.race([
      lookup(host, { all: true, verbatim: true }),
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
  const first = addresses[0] as { address: string; family: number };
  return { url, address: ipaddr.process(first.address).toString(), family: ipaddr.process(first.address).kind() === 'ipv4' ? 4 : 6 };
}

export interface PostResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The start of the answer, at most `keepBytes` bytes, as text. */
  body: string;
  latencyMs: number;
}

// Connections are reused per address (the pool is keyed by the address and TLS name); an idle
// one is closed after 4 s, before the usual 5 s after which servers close theirs.
const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 16, timeout: 4000 }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 16, timeout: 4000 }),
};
/** How much of an answer is read at most (the rest is cut off). */
const READ_LIMIT = 64 * 1024;

/**
 * POSTs `body` to a resolved target: the socket goes to `target.address` (the Host header and TLS
 * server name are the URL's host, so certificates are checked against the name). Resolves with
 * the answer, whatever its status; rejects on a network error or when `timeoutMs` (for the whole
 * exchange) runs out.
 */
export function postPinned(
  target: ResolvedTarget,
  headers: Record<string, string>,
  body: string,
  options: { timeoutMs: number; keepBytes: number },
): Promise<PostResult> {
  const { url } = target;
  const host = hostOf(url);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).request({
      method: 'POST',
      host: target.address,
      family: target.family,
      port: url.port === '' ? DEFAULT_PORTS[url.protocol] : Number(url.port),
      path: `${url.pathname}${url.search}`,
      agent: agents[url.protocol as 'http:' | 'https:'],
      ...(url.protocol === 'https:' && !isIP(host) ? { servername: host } : {}),
      headers: {
        ...headers,
        host: url.host,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
      },
    });
    const timer = setTimeout(() => request.destroy(new Error(`timeout after ${options.timeoutMs} ms`)), options.timeoutMs);
    request.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    request.on('response', (response) => {
      const kept: Buffer[] = [];
      let keptBytes = 0;
      let readBytes = 0;
      const finish = () => {
        clearTimeout(timer);
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: Buffer.concat(kept).toString('utf8'),
          latencyMs: Math.round(performance.now() - started),
        });
      };
      response.on('data', (chunk: Buffer) => {
        readBytes += chunk.length;
        if (keptBytes < options.keepBytes) {
          const part = chunk.subarray(0, options.keepBytes - keptBytes);
          kept.push(part);
          keptBytes += part.length;
        }
        if (readBytes > READ_LIMIT) {
          response.destroy();
          finish();
        }
      });
      response.on('end', finish);
      response.on('error', () => finish());
    });
    request.end(body);
  });
}
