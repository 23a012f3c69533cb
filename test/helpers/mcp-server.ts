import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/**
 * A real MCP server on loopback, built with the SDK's server classes: Streamable HTTP at `/mcp`
 * (stateless: a server per request) and the older HTTP+SSE transport at `/sse` (with its message
 * endpoint at `/messages`). It can require a credential header, never answer at all (`hang`),
 * answer every request with an HTTP error (`failWith`), and
 * offers tools that echo, fail, return an image, return `bytes` of text, or never return, and
 * two whose schemas name a dialect (`dated`, draft-07; `legacy`, draft-04).
 */
export interface TestMcpServer {
  /** The Streamable HTTP endpoint. */
  streamableUrl: string;
  /** The SSE endpoint (the event stream). */
  sseUrl: string;
  /** The credential every request must carry (`header` is lower case); unset: any request passes. */
  required: { header: string; value: string } | null;
  /** While true, every request is accepted and never answered. */
  hang: boolean;
  /**
   * While set, every request is answered with this HTTP status and a body that echoes the
   * server's address and the credential it was given (a client must pass on neither).
   */
  failWith: number | null;
  /** Extra tools to list (to grow the catalog). */
  extraTools: number;
  /** Every request received: method, path and the headers. */
  requests: Array<{ method: string; path: string; headers: http.IncomingHttpHeaders }>;
  /** The calls of tools, with their arguments. */
  calls: Array<{ name: string; args: Record<string, unknown> }>;
  /** Sessions the client ended (stateful only). */
  sessionsEnded: number;
  /** Sessions open now (stateful only). */
  openSessions: () => number;
  close(): Promise<void>;
}

export const TOOLS = [
  {
    name: 'echo',
    description: 'Repeats the text it is given.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  },
  { name: 'fail', description: 'Always reports an error.', inputSchema: { type: 'object', properties: {} } },
  { name: 'picture', description: 'Returns a small image and a caption.', inputSchema: { type: 'object', properties: {} } },
  {
    name: 'big',
    description: 'Returns `bytes` bytes of text.',
    inputSchema: { type: 'object', properties: { bytes: { type: 'integer' } }, required: ['bytes'] },
  },
  { name: 'hang', description: 'Never returns.', inputSchema: { type: 'object', properties: {} } },
  { name: 'files.read/v2', description: 'A name models would refuse.', inputSchema: { type: 'object', properties: {} } },
  {
    name: 'dated',
    description: 'Takes a day (a draft-07 schema, as many SDKs write).',
    inputSchema: {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: { day: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$' } },
      required: ['day'],
      additionalProperties: false,
    },
  },
  {
    name: 'legacy',
    description: 'A draft-04 schema, which Ajv here does not compile.',
    inputSchema: { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object', properties: { text: { type: 'string' } } },
  },
];

async function answer(name: string, args: Record<string, unknown>, closed: Promise<void>): Promise<CallToolResult> {
  switch (name) {
    case 'echo':
      return { content: [{ type: 'text', text: `echo: ${String(args.text)}` }] };
    case 'fail':
      return { content: [{ type: 'text', text: 'the tool failed on purpose' }], isError: true };
    case 'picture':
      return {
        content: [
          { type: 'image', data: Buffer.alloc(300, 1).toString('base64'), mimeType: 'image/png' },
          { type: 'text', text: 'a grey square' },
        ],
      };
    case 'big':
      return { content: [{ type: 'text', text: 'x'.repeat(Number(args.bytes)) }] };
    case 'hang':
      await closed;
      return { content: [] };
    default:
      return { content: [{ type: 'text', text: `called ${name}` }] };
  }
}

/**
 * `stateful`: the Streamable HTTP endpoint keeps sessions (`Mcp-Session-Id`, ended by a DELETE)
 * instead of answering each request with a server of its own.
 */
export async function startMcpServer(
  required: { header: string; value: string } | null = null,
  options: { stateful?: boolean } = {},
): Promise<TestMcpServer> {
  let closing!: () => void;
  const closed = new Promise<void>((resolve) => {
    closing = resolve;
  });
  const sseSessions = new Map<string, SSEServerTransport>();
  const httpSessions = new Map<string, StreamableHTTPServerTransport>();

  const state: Omit<TestMcpServer, 'streamableUrl' | 'sseUrl' | 'close'> = {
    required,
    hang: false,
    failWith: null,
    extraTools: 0,
    requests: [],
    calls: [],
    sessionsEnded: 0,
    openSessions: () => httpSessions.size,
  };

  function newServer(): McpServer {
    const mcp = new McpServer({ name: 'test-mcp-server', version: '1.0.0' }, { capabilities: { tools: {} } });
    mcp.server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [
        ...TOOLS,
        ...Array.from({ length: state.extraTools }, (_, i) => ({
          name: `extra_${i}`,
          description: 'd'.repeat(1000),
          inputSchema: { type: 'object' as const, properties: {} },
        })),
      ],
    }));
    mcp.server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const args = (request.params.arguments ?? {}) as Record<string, unknown>;
      state.calls.push({ name: request.params.name, args });
      return answer(request.params.name, args, closed);
    });
    return mcp;
  }

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    state.requests.push({ method: req.method ?? '', path: url.pathname, headers: req.headers });
    if (state.hang) return; // accepted, never answered
    if (state.failWith !== null) {
      const presented = state.required ? String(req.headers[state.required.header] ?? '') : '';
      const body = { error: `upstream at ${req.headers.host ?? ''} failed for ${presented}` };
      res.writeHead(state.failWith, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      return;
    }
    if (state.required && req.headers[state.required.header] !== state.required.value) {
      // Echoes what it was given, as some servers do: the client must not pass it on.
      res
        .writeHead(401, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: `invalid credentials: ${String(req.headers[state.required.header] ?? '')}` }));
      return;
    }
    try {
      if (url.pathname === '/mcp' && options.stateful) {
        const sessionId = req.headers['mcp-session-id'];
        let transport = typeof sessionId === 'string' ? httpSessions.get(sessionId) : undefined;
        if (!transport) {
          if (sessionId !== undefined || req.method !== 'POST') {
            res.writeHead(404).end('no such session');
            return;
          }
          const created = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: (id) => {
              httpSessions.set(id, created);
            },
            onsessionclosed: (id) => {
              httpSessions.delete(id);
              state.sessionsEnded += 1;
            },
          });
          await newServer().connect(created);
          transport = created;
        }
        await transport.handleRequest(req, res);
      } else if (url.pathname === '/mcp') {
        if (req.method !== 'POST') {
          res.writeHead(405, { allow: 'POST' }).end();
          return;
        }
        const mcp = newServer();
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
        res.on('close', () => {
          void transport.close();
          void mcp.close();
        });
        await mcp.connect(transport);
        await transport.handleRequest(req, res);
      } else if (url.pathname === '/sse' && req.method === 'GET') {
        const transport = new SSEServerTransport('/messages', res);
        sseSessions.set(transport.sessionId, transport);
        const mcp = newServer();
        res.on('close', () => {
          sseSessions.delete(transport.sessionId);
          void mcp.close();
        });
        await mcp.connect(transport);
      } else if (url.pathname === '/messages' && req.method === 'POST') {
        const transport = sseSessions.get(url.searchParams.get('sessionId') ?? '');
        if (!transport) res.writeHead(404).end('no such session');
        else await transport.handlePostMessage(req, res);
      } else {
        res.writeHead(404).end();
      }
    } catch (error) {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  return Object.assign(state, {
    streamableUrl: `${base}/mcp`,
    sseUrl: `${base}/sse`,
    close: async () => {
      closing();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
