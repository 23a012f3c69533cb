/** Node's and undici's codes for a connection that failed, and what each means, in words. */
const REASONS: Record<string, string> = {
  ECONNREFUSED: 'the connection was refused (nothing listens at that address and port)',
  ECONNRESET: 'the connection was reset',
  EPIPE: 'the connection was closed',
  UND_ERR_SOCKET: 'the connection was closed',
  ETIMEDOUT: 'the connection timed out',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name could not be resolved now',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
};

/**
 * Why a connection failed, from the code anywhere in an error's causes: node:http and pg throw
 * the socket's error itself (`connect ECONNREFUSED …`), fetch throws `fetch failed` with it as the
 * cause, and a name with several addresses fails as an AggregateError of one per address. Null
 * when no code there names a connection failure. The reason holds no address.
 */
export function connectionFailure(error: unknown): { code: string; reason: string } | null {
  const queue: unknown[] = [error];
  for (let seen = 0; queue.length > 0 && seen < 20; seen += 1) {
    const e = queue.shift() as { code?: unknown; cause?: unknown; errors?: unknown } | null | undefined;
    if (!e || typeof e !== 'object') continue;
    if (typeof e.code === 'string' && e.code in REASONS) return { code: e.code, reason: REASONS[e.code]! };
    if (e.cause) queue.push(e.cause);
    if (Array.isArray(e.errors)) queue.push(...(e.errors as unknown[]));
  }
  return null;
}
