import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import {
  AddressNotAllowed,
  checkUrl,
  DEFAULT_PORTS,
  HostNotResolved,
  hostOf,
  type OutboundPolicy,
  type ResolvedTarget,
  type Resolver,
  resolveTarget,
  systemResolver,
  UrlNotAllowed,
} from './targets';

/**
 * The one guard of every request to a URL a user chose (webhook receivers, model provider
 * connections, MCP servers, OAuth endpoints), against server-side request forgery: the host is
 * resolved here, every address it resolves to must be a public unicast one, and the connection
 * goes to the address that was checked (the name is never resolved again, so a second DNS answer
 * cannot point it elsewhere). Redirects are never followed; every exchange has a timeout and a
 * cap on the bytes read. URLs the operator configured are trusted and do not come here.
 */

/** The guard's settings, and the refusals of a URL that its callers tell apart (targets.ts). */
export { AddressNotAllowed, HostNotResolved, type OutboundPolicy, type Resolver, UrlNotAllowed } from './targets';

/** The answer was a redirect, which is never followed. */
export class RedirectRefused extends Error {
  override name = 'RedirectRefused';
  constructor(
    readonly status: number,
    readonly location: string,
  ) {
    super(`redirects are not followed (${status}, Location: ${location.slice(0, 300)})`);
  }
}

/** The answer's body is longer than the cap. */
export class ResponseTooLarge extends Error {
  override name = 'ResponseTooLarge';
  constructor(readonly maxBytes: number) {
    super(`the response is larger than ${maxBytes} bytes`);
  }
}

/** The exchange (resolution, connection, answer and body) took longer than its timeout. */
export class OutboundTimeout extends Error {
  override name = 'OutboundTimeout';
  constructor(readonly timeoutMs: number) {
    super(`timeout after ${timeoutMs} ms`);
  }
}

/** The bounds of one exchange: the time for all of it (body included) and the bytes of the body read at most. */
export interface OutboundLimits {
  timeoutMs: number;
  maxBytes: number;
}

export interface OutboundRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  signal?: AbortSignal | null;
}

export interface OutboundResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body, at most `maxBytes` of it. */
  body: Buffer;
  /** The body went on past `maxBytes` (the rest was not read). */
  truncated: boolean;
  /** From the start of the request (name resolution included) to the end of the body. */
  latencyMs: number;
}

// Connections are reused per address (the pool is keyed by the address and TLS name); an idle
// one is closed after 4 s, before the usual 5 s after which servers close theirs.
const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 16, timeout: 4000 }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 16, timeout: 4000 }),
};

/** An exchange under way: its answer (destroyed with an error on timeout or abort until `done`). */
interface Exchange {
  response: http.IncomingMessage;
  started: number;
  /** Stops the timer and the abort listener (the body was read or abandoned). */
  done: () => void;
}

/**
 * The guarded outbound client, one per process: `checkUrl`/`whyRefused` to validate a URL when a
 * user saves it, `request` for a bounded exchange returning a capped body, and `fetcher` for a
 * `fetch` implementation with the same guard (for the AI SDK and the MCP SDK).
 */
export class Outbound {
  constructor(
    readonly policy: OutboundPolicy,
    private readonly resolver: Resolver = systemResolver,
  ) {}

  /** Checks what needs no network (scheme, port, credentials, IP literals). Throws UrlNotAllowed or AddressNotAllowed. */
  checkUrl(raw: string): URL {
    return checkUrl(raw, this.policy);
  }

  /**
   * The check when a user saves a URL (a webhook receiver, a model provider connection, an MCP
   * server…): why the guard refuses it (for a 400 naming the field), or null. A name that does
   * not resolve (yet) is accepted, since every request checks it again.
   */
  async whyRefused(raw: string, timeoutMs = 5000): Promise<string | null> {
    try {
      await resolveTarget(raw, this.policy, timeoutMs, this.resolver);
      return null;
    } catch (error) {
      if (error instanceof UrlNotAllowed || error instanceof AddressNotAllowed) return error.message;
      if (error instanceof HostNotResolved) return null;
      throw error;
    }
  }

  /**
   * One exchange with a URL a user chose; resolves with the answer whatever its status (a
   * redirect is returned, not followed) and at most `maxBytes` of its body. Rejects with
   * UrlNotAllowed, AddressNotAllowed, HostNotResolved, OutboundTimeout, the signal's reason, or a
   * network error.
   */
  async request(raw: string, init: OutboundRequest, limits: OutboundLimits): Promise<OutboundResponse> {
    const exchange = await this.exchange(raw, init, limits);
    const { response } = exchange;
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let truncated = false;
    try {
      for await (const chunk of response as AsyncIterable<Buffer>) {
        const part = chunk.subarray(0, limits.maxBytes - keptBytes);
        kept.push(part);
        keptBytes += part.length;
        if (part.length < chunk.length) {
          truncated = true;
          break;
        }
      }
    } finally {
      exchange.done();
      if (truncated) response.destroy();
    }
    return {
      status: response.statusCode ?? 0,
      headers: response.headers,
      body: Buffer.concat(kept),
      truncated,
      latencyMs: Math.round(performance.now() - exchange.started),
    };
  }

  /**
   * A `fetch` with this guard on every request: the resolved address is checked and connected to,
   * a redirect rejects with RedirectRefused, the timeout covers the whole exchange (body
   * included), and a body longer than `maxBytes` errors with ResponseTooLarge. Request bodies are
   * buffered; responses are not decompressed (`accept-encoding: identity` is sent).
   */
  fetcher(limits: OutboundLimits): typeof fetch {
    return async (input, init) => {
      const request = new Request(input, init?.body instanceof ReadableStream ? ({ ...init, duplex: 'half' } as RequestInit) : init);
      const headers: Record<string, string> = {};
      request.headers.forEach((value, name) => {
        headers[name] = value;
      });
      const body = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
      const exchange = await this.exchange(request.url, { method: request.method, headers, body, signal: request.signal }, limits);
      const { response } = exchange;
      const status = response.statusCode ?? 0;
      const responseHeaders = new Headers();
      for (const [name, value] of Object.entries(response.headers)) {
        for (const item of ([] as string[]).concat(value ?? [])) responseHeaders.append(name, item);
      }
      if (status >= 300 && status < 400) {
        exchange.done();
        response.destroy();
        throw new RedirectRefused(status, responseHeaders.get('location') ?? '');
      }
      if (request.method === 'HEAD' || [204, 205, 304].includes(status)) {
        exchange.done();
        response.resume();
        return new Response(null, { status, statusText: response.statusMessage, headers: responseHeaders });
      }
      return new Response(cappedStream(exchange, limits.maxBytes), {
        status,
        statusText: response.statusMessage,
        headers: responseHeaders,
      });
    };
  }

  /** Resolves and checks the target, connects to the checked address and waits for the answer's head. */
  private async exchange(raw: string, init: OutboundRequest, { timeoutMs }: OutboundLimits): Promise<Exchange> {
    const started = performance.now();
    const signal = init.signal ?? null;
    signal?.throwIfAborted();
    let failWith: (error: Error) => void = () => undefined;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      failWith(new OutboundTimeout(timeoutMs));
    }, timeoutMs);
    const onAbort = () => failWith(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal?.addEventListener('abort', onAbort);
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    try {
      const target = await Promise.race([
        resolveTarget(raw, this.policy, timeoutMs, this.resolver),
        new Promise<never>((_, reject) => {
          failWith = reject;
        }),
      ]);
      if (timedOut) throw new OutboundTimeout(timeoutMs);
      signal?.throwIfAborted();
      const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
        const request = send(target, init);
        failWith = (error) => {
          request.destroy(error);
          reject(error);
        };
        request.on('error', reject);
        request.on('response', (answer) => {
          failWith = (error) => answer.destroy(error);
          resolve(answer);
        });
      });
      return { response, started, done };
    } catch (error) {
      done();
      throw error;
    }
  }
}

/** Sends the request to the checked address; the Host header and TLS server name are the URL's host. */
function send(target: ResolvedTarget, init: OutboundRequest): http.ClientRequest {
  const { url } = target;
  const host = hostOf(url);
  const body = init.body === undefined ? undefined : Buffer.from(init.body);
  const request = (url.protocol === 'https:' ? https : http).request({
    method: init.method ?? 'GET',
    host: target.address,
    family: target.family,
    port: url.port === '' ? DEFAULT_PORTS[url.protocol] : Number(url.port),
    path: `${url.pathname}${url.search}`,
    agent: agents[url.protocol as 'http:' | 'https:'],
    ...(url.protocol === 'https:' && !isIP(host) ? { servername: host } : {}),
    headers: {
      ...init.headers,
      host: url.host,
      'accept-encoding': 'identity',
      ...(body === undefined ? {} : { 'content-length': String(body.length) }),
    },
  });
  request.end(body);
  return request;
}

/** The answer's body as a web stream that errors past `maxBytes` (or when the exchange fails). */
function cappedStream(exchange: Exchange, maxBytes: number): ReadableStream<Uint8Array> {
  const { response } = exchange;
  let read = 0;
  // Once the stream is closed, errored or cancelled (the reader gave up: an MCP client closing
  // its event stream), what the socket still emits is dropped.
  let settled = false;
  const settle = () => {
    settled = true;
    exchange.done();
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      response.on('data', (chunk: Buffer) => {
        if (settled) return;
        read += chunk.length;
        if (read > maxBytes) {
          settle();
          controller.error(new ResponseTooLarge(maxBytes));
          response.destroy();
          return;
        }
        controller.enqueue(new Uint8Array(chunk));
        if ((controller.desiredSize ?? 0) <= 0) response.pause();
      });
      response.on('end', () => {
        if (settled) return;
        settle();
        controller.close();
      });
      response.on('error', (error) => {
        if (settled) return;
        settle();
        controller.error(error);
      });
    },
    pull() {
      response.resume();
    },
    cancel() {
      settle();
      response.destroy();
    },
  });
}
