import type { Client } from '@modelcontextprotocol/sdk/client/index.js' with { 'resolution-mode': 'import' };
import { errorDetail, withoutAddresses } from '../../platform/ai/models';
import {
  AddressNotAllowed,
  HostNotResolved,
  type Outbound,
  OutboundTimeout,
  RedirectRefused,
  ResponseTooLarge,
  UrlNotAllowed,
} from '../../platform/net/outbound';

/**
 * The MCP client: each exchange with a server (reading its tool catalog, calling one tool) opens
 * a session with the official SDK's client over the server's transport, does its one thing and
 * closes it. Nothing is kept between exchanges, so any instance can serve any call. Every request
 * goes through the outbound guard (resolved address checked, no redirects, a timeout and a cap on
 * the bytes of each answer); the whole exchange has the server's timeout. Failures are
 * McpFailure, whose message never holds an address or the credentials.
 */

export type McpTransportKind = 'streamable_http' | 'sse';

/** Where a server is and how to authenticate to it (the credentials opened). */
export interface McpTarget {
  url: string;
  transport: McpTransportKind;
  /** The headers that carry the credentials, if any. */
  headers: Record<string, string>;
  /** The whole exchange (connecting included) ends after this. */
  timeoutMs: number;
}

export interface ListedTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** A tool call's answer as the server gave it (MCP `CallToolResult`, or the older `toolResult`). */
export interface RawToolResult {
  content?: unknown;
  structuredContent?: unknown;
  toolResult?: unknown;
  isError?: unknown;
}

/** How an exchange ended, the metrics' `outcome`. */
export type McpOutcome =
  'ok' | 'tool_error' | 'timeout' | 'unreachable' | 'http_error' | 'not_allowed' | 'too_large' | 'protocol' | 'cancelled';

/** An exchange that failed; `message` is safe to store and show, `detail` is for the log only. */
export class McpFailure extends Error {
  override name = 'McpFailure';
  constructor(
    readonly outcome: Exclude<McpOutcome, 'ok' | 'tool_error'>,
    message: string,
    readonly detail: string,
    /** The HTTP status the server answered (`http_error`), when it answered one. */
    readonly status: number | null = null,
  ) {
    super(message);
  }
}

/** A catalog bigger than this (its tools' JSON) is refused. */
export const CATALOG_MAX_BYTES = 1024 * 1024;
/** A catalog with more tools than this is refused. */
export const CATALOG_MAX_TOOLS = 500;
/** Tool descriptions are cut to this many characters. */
export const DESCRIPTION_MAX_CHARS = 4000;
const CATALOG_MAX_PAGES = 50;
const CLIENT_INFO = { name: 'ai-workspace-service', version: '1.0.0' };

/** Why the exchange was stopped before the SDK said anything itself. */
class Stopped extends Error {
  constructor(readonly reason: unknown) {
    super('stopped');
  }
}

export interface McpConnectorSettings {
  /** The most bytes one answer (one HTTP response, or the event stream of an SSE session) may have. */
  maxResponseBytes: number;
}

export class McpConnector {
  constructor(
    private readonly outbound: Outbound,
    private readonly settings: McpConnectorSettings,
  ) {}

  /** The server's tools (all pages); McpFailure when it cannot be read or is larger than the caps. */
  async listTools(target: McpTarget, secret: string | null): Promise<ListedTool[]> {
    const maxBytes = Math.min(this.settings.maxResponseBytes, CATALOG_MAX_BYTES + 64 * 1024);
    return this.session(target, secret, maxBytes, undefined, async (client, options) => {
      const tools: ListedTool[] = [];
      let bytes = 0;
      let cursor: string | undefined;
      for (let page = 0; page < CATALOG_MAX_PAGES; page++) {
        const answer = await client.listTools(cursor === undefined ? {} : { cursor }, options);
        for (const tool of answer.tools) {
          const listed: ListedTool = {
            name: tool.name,
            description: (tool.description ?? tool.title ?? '').slice(0, DESCRIPTION_MAX_CHARS),
            inputSchema: tool.inputSchema as Record<string, unknown>,
          };
          bytes += Buffer.byteLength(JSON.stringify(listed));
          tools.push(listed);
          if (tools.length > CATALOG_MAX_TOOLS)
            throw new McpFailure(
              'too_large',
              `The MCP server lists more than ${CATALOG_MAX_TOOLS} tools, the most a server may have.`,
              `${tools.length}+ tools`,
            );
          if (bytes > CATALOG_MAX_BYTES)
            throw new McpFailure(
              'too_large',
              `The MCP server's tool catalog is larger than ${CATALOG_MAX_BYTES} bytes.`,
              `${bytes}+ bytes`,
            );
        }
        cursor = answer.nextCursor;
        if (!cursor) return tools;
      }
      throw new McpFailure('too_large', `The MCP server's tool catalog has more than ${CATALOG_MAX_PAGES} pages.`, 'pages');
    });
  }

  /** Calls one tool; McpFailure when the exchange fails (a tool that reports an error is a result). */
  async callTool(
    target: McpTarget,
    secret: string | null,
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<RawToolResult> {
    return this.session(target, secret, this.settings.maxResponseBytes, signal, async (client, options) => {
      return (await client.callTool({ name, arguments: args }, undefined, options)) as RawToolResult;
    });
  }

  /**
   * One session: connect (initialize), `work`, close. Stopped at the target's timeout, when
   * `signal` aborts, or as soon as the guard refuses a request or an answer grows past `maxBytes`.
   */
  private async session<T>(
    target: McpTarget,
    secret: string | null,
    maxBytes: number,
    signal: AbortSignal | undefined,
    work: (client: Client, options: { signal: AbortSignal; timeout: number }) => Promise<T>,
  ): Promise<T> {
    const sdk = await import('@modelcontextprotocol/sdk/client/index.js');
    const controller = new AbortController();
    const stop = (reason: unknown) => {
      if (!controller.signal.aborted) controller.abort(new Stopped(reason));
    };

    const guarded = this.outbound.fetcher({ timeoutMs: target.timeoutMs, maxBytes });
    // The first request that failed: the SSE transport reports it only as text.
    let fetchError: unknown;
    // A refusal of the guard ends the exchange at once (the SDK may only report it to onerror).
    const fetcher: typeof fetch = async (input, init) => {
      try {
        const response = await guarded(input, init);
        return response.body
          ? new Response(watched(response.body, stop), {
              status: response.status,
              statusText: response.statusText,
              headers: response.headers,
            })
          : response;
      } catch (error) {
        fetchError ??= error;
        if (isGuardError(error)) stop(error);
        throw error;
      }
    };
    const transport = await openTransport(target, fetcher);
    const client = new sdk.Client(CLIENT_INFO, { capabilities: {} });
    client.onerror = (error) => {
      if (isGuardError(error)) stop(error);
    };
    const options = { signal: controller.signal, timeout: target.timeoutMs };
    const timer = setTimeout(() => stop(new OutboundTimeout(target.timeoutMs)), target.timeoutMs);
    const onAbort = () => stop(new McpFailure('cancelled', 'The call was cancelled.', 'cancelled'));
    signal?.addEventListener('abort', onAbort);
    if (signal?.aborted) onAbort();
    try {
      await client.connect(transport, options);
      const result = await work(client, options);
      // A server that keeps sessions is told this one is over (Streamable HTTP: DELETE with its id).
      if ('terminateSession' in transport && transport.sessionId !== undefined) await transport.terminateSession().catch(() => undefined);
      return result;
    } catch (error) {
      const reason = controller.signal.aborted ? (controller.signal.reason as Stopped).reason : error;
      const failure = describeFailure(reason, target.timeoutMs, secret);
      throw failure.outcome === 'protocol' && fetchError !== undefined && !(reason instanceof McpFailure)
        ? describeFailure(fetchError, target.timeoutMs, secret)
        : failure;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      await client.close().catch(() => undefined);
    }
  }
}

/** The SDK's client transport of the target's kind, every request through `fetcher`. */
async function openTransport(target: McpTarget, fetcher: typeof fetch) {
  const url = new URL(target.url);
  if (target.transport === 'sse') {
    const { SSEClientTransport } = await import('@modelcontextprotocol/sdk/client/sse.js');
    return new SSEClientTransport(url, { fetch: fetcher, requestInit: { headers: target.headers }, eventSourceInit: { fetch: fetcher } });
  }
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  return new StreamableHTTPClientTransport(url, { fetch: fetcher, requestInit: { headers: target.headers } });
}

/**
 * The body, which stops the exchange when reading it fails because of the guard (an answer past
 * its cap): the SDK reports such an error of an event stream only as text, to onerror.
 */
function watched(body: ReadableStream<Uint8Array>, stop: (reason: unknown) => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (error) {
        if (isGuardError(error)) stop(error);
        controller.error(error);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

function isGuardError(error: unknown): boolean {
  return (
    error instanceof ResponseTooLarge ||
    error instanceof RedirectRefused ||
    error instanceof AddressNotAllowed ||
    error instanceof UrlNotAllowed ||
    error instanceof OutboundTimeout ||
    error instanceof HostNotResolved ||
    causes(error).some((cause) => cause instanceof ResponseTooLarge)
  );
}

/** The error and its causes, outermost first. */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  let current = error;
  while (current !== undefined && current !== null && chain.length < 5) {
    chain.push(current);
    current = (current as { cause?: unknown }).cause;
  }
  return chain;
}

/** The text without the credentials and without addresses, at most 300 characters. */
export function scrub(text: string, secret: string | null): string {
  const clean = secret ? text.split(secret).join('[credentials]') : text;
  return withoutAddresses(clean).slice(0, 300);
}

/** What a failure is called: an McpFailure whose message is safe to store and show. */
export function describeFailure(error: unknown, timeoutMs: number, secret: string | null): McpFailure {
  const detail = scrub(errorDetail(error), secret);
  const chain = causes(error);
  const find = <E>(type: abstract new (...args: never[]) => E) => chain.find((e): e is E => e instanceof type);
  if (error instanceof McpFailure) return error;
  if (find(OutboundTimeout)) return new McpFailure('timeout', `The MCP server did not answer within ${timeoutMs} ms.`, detail);
  const tooLarge = find(ResponseTooLarge);
  if (tooLarge) return new McpFailure('too_large', `The MCP server's answer is larger than ${tooLarge.maxBytes} bytes.`, detail);
  const redirect = find(RedirectRefused);
  if (redirect)
    return new McpFailure('http_error', `The MCP server answered a redirect (${redirect.status}), which is not followed.`, detail);
  const address = find(AddressNotAllowed);
  if (address) return new McpFailure('not_allowed', `The MCP server's address is not allowed (a ${address.range} address).`, detail);
  if (find(UrlNotAllowed))
    return new McpFailure(
      'not_allowed',
      `The MCP server's URL is not allowed: ${scrub((find(UrlNotAllowed) as Error).message, secret)}.`,
      detail,
    );
  if (find(HostNotResolved)) return new McpFailure('unreachable', "The MCP server's host name does not resolve.", detail);
  for (const e of chain) {
    const { name, code } = e as { name?: unknown; code?: unknown };
    if (typeof name === 'string' && /McpError/.test(name) && typeof code === 'number') {
      if (code === -32001) return new McpFailure('timeout', `The MCP server did not answer within ${timeoutMs} ms.`, detail);
      if (code === -32000) return new McpFailure('unreachable', 'The MCP server closed the connection.', detail);
      return new McpFailure(
        'protocol',
        `The MCP server answered an error (${code}): ${scrub((e as Error).message.replace(/^MCP error -?\d+:\s*/, ''), secret)}`,
        detail,
      );
    }
    if (typeof code === 'number' && code >= 300) {
      const hint = code === 401 || code === 403 ? ' (check the credentials)' : '';
      return new McpFailure('http_error', `The MCP server answered ${code}${hint}.`, detail, code);
    }
    if (typeof code === 'string' || (e instanceof TypeError && /fetch failed/.test(e.message))) {
      return new McpFailure('unreachable', 'The MCP server could not be reached.', detail);
    }
    if (typeof name === 'string' && /ZodError/.test(name))
      return new McpFailure('protocol', "The MCP server's answer is not valid MCP.", detail);
  }
  if (chain.some((e) => (e as { name?: unknown }).name === 'SseError'))
    return new McpFailure('unreachable', 'The MCP server could not be reached.', detail);
  return new McpFailure('protocol', "The MCP server's answer could not be read.", detail);
}
