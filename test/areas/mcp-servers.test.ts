import { Writable } from 'node:stream';
import { sql } from 'kysely';
import type supertest from 'supertest';
import winston from 'winston';
import { McpExchanges } from '../../src/areas/mcp-servers/exchanges';
import { McpServerService } from '../../src/areas/mcp-servers/service';
import { McpToolSource } from '../../src/areas/mcp-servers/tool-source';
import { redactSecrets } from '../../src/platform/logger';
import { Outbound } from '../../src/platform/net/outbound';
import { describeCrudContract } from '../helpers/crud-contract';
import { type Harness, startHarness, type TestUser, userNamed } from '../helpers/harness';
import { startMcpServer, type TestMcpServer, TOOLS } from '../helpers/mcp-server';

// Credentials long and distinctive enough that any copy of them (in a body, a log line, an audit
// event or a database column) is found by a plain search.
const TOKEN = 'mcp-token-ALICE-SECRET-7e3b9c1d5f2a8064';
const HEADER_VALUE = 'mcp-header-ALICE-SECRET-2a9d4f6b8c1e3057';
const WRONG = 'mcp-token-WRONG-SECRET-5c8e1a3f7b2d9046';
const SECRETS = [TOKEN, HEADER_VALUE, WRONG];
const ROOT = 'root-admin';
const LIMIT = 6;

let bearer: TestMcpServer;
let header: TestMcpServer;
let open: TestMcpServer;
let h: Harness;
let alice: TestUser;
let bob: TestUser;
let admin: TestUser;
let stdoutSpy: jest.SpyInstance | undefined;
/** Every log entry the service wrote, at every level, and its access log lines. */
const logLines: string[] = [];
/** Every response body the tests received. */
const bodies: string[] = [];

beforeAll(async () => {
  [bearer, header, open] = await Promise.all([
    startMcpServer({ header: 'authorization', value: `Bearer ${TOKEN}` }),
    startMcpServer({ header: 'x-api-key', value: HEADER_VALUE }),
    startMcpServer(null, { stateful: true }),
  ]);
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logLines.push(chunk.toString());
      done();
    },
  });
  const logger = winston.createLogger({
    level: 'debug',
    format: winston.format.combine(redactSecrets(), winston.format.json()),
    transports: [new winston.transports.Stream({ stream })],
  });
  // The access log writes its lines to stdout itself: kept with the others (and out of the test output).
  const write = process.stdout.write.bind(process.stdout);
  stdoutSpy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
    const text = chunk.toString();
    if (!text.startsWith('{"level":"info","message":"request"')) return write(chunk, ...(rest as []));
    logLines.push(text);
    return true;
  });
  h = await startHarness(
    {
      OUTBOUND_ALLOW_LOOPBACK: 'true',
      BOOTSTRAP_ADMIN_USER_IDS: ROOT,
      CAPABILITY_CACHE_MS: '0',
      MCP_SERVERS_PER_USER: String(LIMIT),
      METRICS_TOKEN: 'metrics-token-0123456789',
    },
    { logger },
  );
  alice = await h.newUser('alice');
  bob = await h.newUser('bob');
  admin = await userNamed(h, ROOT);
});

afterAll(async () => {
  stdoutSpy?.mockRestore();
  await h?.close();
  await Promise.all([bearer?.close(), header?.close(), open?.close()]);
});

/** Sends a request and keeps its response body for the search for credentials. */
async function call(req: supertest.Test): Promise<supertest.Response> {
  const res = await req;
  bodies.push(typeof res.body === 'string' ? res.body : `${res.text ?? ''} ${JSON.stringify(res.body)}`);
  return res;
}

const create = (user: TestUser, body: Record<string, unknown>) => call(h.http().post('/api/v1/mcp-servers').set(user.auth).send(body));
const patch = (user: TestUser, body: Record<string, unknown>) => call(h.http().patch('/api/v1/mcp-servers').set(user.auth).send(body));
const remove = (user: TestUser, serverId: string) => call(h.http().delete('/api/v1/mcp-servers').query({ serverId }).set(user.auth));
const get = (user: TestUser, serverId: string) => call(h.http().get('/api/v1/mcp-servers').query({ serverId }).set(user.auth));
const refresh = (user: TestUser, serverId: string) => call(h.http().post('/api/v1/mcp-servers/refresh').set(user.auth).send({ serverId }));
const draft = (user: TestUser, body: Record<string, unknown>) => call(h.http().post('/api/v1/mcp-servers/test').set(user.auth).send(body));
const controller = () => new AbortController().signal;

let githubId: string;
let sseId: string;

describe('servers and their catalogs', () => {
  test('a Streamable HTTP server with a bearer token: saved, its catalog read at once, the token write-only', async () => {
    const res = await create(alice, {
      name: 'GitHub',
      url: bearer.streamableUrl,
      transport: 'streamable_http',
      authentication: 'bearer',
      credentials: TOKEN,
      toolPolicies: { echo: 'allow', fail: 'deny' },
    });
    expect(res.status).toBe(200);
    const server = res.body.server;
    expect(server).toMatchObject({
      name: 'GitHub',
      toolPrefix: 'github',
      url: bearer.streamableUrl,
      transport: 'streamable_http',
      authentication: 'bearer',
      headerName: null,
      hasCredentials: true,
      enabled: true,
      timeoutMs: 30000,
      defaultToolPolicy: 'approval_required',
      toolPolicies: { echo: 'allow', fail: 'deny' },
      status: 'active',
      lastError: null,
      catalogRefreshedAt: expect.any(Number),
    });
    expect(server.tools.map((t: { name: string }) => t.name)).toEqual(TOOLS.map((t) => t.name));
    expect(server.tools[0]).toEqual({
      name: 'echo',
      namespacedName: 'github__echo',
      description: 'Repeats the text it is given.',
      inputSchema: TOOLS[0]!.inputSchema,
      policy: 'allow',
    });
    expect(server.tools.find((t: { name: string }) => t.name === 'fail').policy).toBe('deny');
    expect(server.tools.find((t: { name: string }) => t.name === 'big').policy).toBe('approval_required');
    // A name models would refuse is made acceptable, with a hash that keeps it distinct and stable.
    const odd = server.tools.find((t: { name: string }) => t.name === 'files.read/v2');
    expect(odd.namespacedName).toMatch(/^github__files_read_v2_[0-9a-f]{8}$/);
    for (const tool of server.tools) expect(tool.namespacedName).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(JSON.stringify(res.body)).not.toContain(TOKEN);
    // The server received the token on every request.
    expect(bearer.requests.length).toBeGreaterThan(0);
    for (const request of bearer.requests) expect(request.headers.authorization).toBe(`Bearer ${TOKEN}`);
    githubId = server.serverId;
  });

  test('an SSE server with a header credential; a second server named alike gets its own prefix', async () => {
    const res = await create(alice, {
      name: 'github!',
      url: header.sseUrl,
      transport: 'sse',
      authentication: 'header',
      headerName: 'X-Api-Key',
      credentials: HEADER_VALUE,
      defaultToolPolicy: 'allow',
    });
    expect(res.status).toBe(200);
    expect(res.body.server).toMatchObject({
      toolPrefix: 'github-2',
      transport: 'sse',
      authentication: 'header',
      headerName: 'X-Api-Key',
      hasCredentials: true,
      status: 'active',
    });
    expect(res.body.server.tools.map((t: { namespacedName: string }) => t.namespacedName)).toContain('github-2__echo');
    expect(header.requests.map((r) => r.path)).toEqual(expect.arrayContaining(['/sse', '/messages']));
    for (const request of header.requests) expect(request.headers['x-api-key']).toBe(HEADER_VALUE);
    sseId = res.body.server.serverId;
  });

  test('refused credentials: saved in error, lastError says why without the credentials or the address', async () => {
    const res = await create(alice, {
      name: 'Wrong',
      url: bearer.streamableUrl,
      transport: 'streamable_http',
      authentication: 'bearer',
      credentials: WRONG,
    });
    expect(res.status).toBe(200);
    expect(res.body.server).toMatchObject({
      status: 'error',
      lastError: 'The MCP server answered 401 (check the credentials).',
      tools: [],
      catalogRefreshedAt: null,
    });
    // A new token sets it back, and the catalog is read again.
    const fixed = await patch(alice, { serverId: res.body.server.serverId, credentials: TOKEN });
    expect(fixed.body.server).toMatchObject({ status: 'active', lastError: null, hasCredentials: true });
    expect(fixed.body.server.tools.length).toBe(TOOLS.length);
    expect((await remove(alice, res.body.server.serverId)).status).toBe(200);
  });

  test('a server that never answers: the create returns at its timeout, in error', async () => {
    const hanging = await startMcpServer();
    hanging.hang = true;
    try {
      for (const transport of ['streamable_http', 'sse'] as const) {
        const url = transport === 'sse' ? hanging.sseUrl : hanging.streamableUrl;
        const started = Date.now();
        const res = await create(alice, { name: 'Slow', url, transport, timeoutMs: 1000 });
        expect(res.status).toBe(200);
        expect(res.body.server).toMatchObject({ status: 'error', lastError: 'The MCP server did not answer within 1000 ms.' });
        // Not a timing margin: far below the SDK's own 60 s default, so the server's timeout ended it.
        expect(Date.now() - started).toBeLessThan(30_000);
        expect((await remove(alice, res.body.server.serverId)).status).toBe(200);
      }
    } finally {
      await hanging.close();
    }
  });

  test('a catalog larger than the cap is refused; a failed refresh keeps the tools found before', async () => {
    const growing = await startMcpServer();
    try {
      const res = await create(alice, { name: 'Growing', url: growing.streamableUrl, transport: 'streamable_http' });
      expect(res.body.server.status).toBe('active');
      growing.extraTools = 1200; // about 1.2 MB of descriptions
      const refreshed = await refresh(alice, res.body.server.serverId);
      expect(refreshed.status).toBe(200);
      expect(refreshed.body.server).toMatchObject({
        status: 'error',
        lastError: expect.stringMatching(/^The MCP server('s answer is larger than| lists more than|'s tool catalog is larger than)/),
      });
      expect(refreshed.body.server.tools.length).toBe(TOOLS.length);
      growing.extraTools = 0;
      expect((await refresh(alice, res.body.server.serverId)).body.server.status).toBe('active');
      expect((await remove(alice, res.body.server.serverId)).status).toBe(200);
    } finally {
      await growing.close();
    }
  });

  test('list, read one, pages', async () => {
    const list = await call(h.http().get('/api/v1/mcp-servers').set(alice.auth));
    expect(list.status).toBe(200);
    expect(list.body.servers.map((s: { serverId: string }) => s.serverId)).toEqual([sseId, githubId]);
    expect(list.body.nextCursor).toBeNull();
    const page = await call(h.http().get('/api/v1/mcp-servers').query({ limit: 1 }).set(alice.auth));
    expect(page.body.servers.map((s: { serverId: string }) => s.serverId)).toEqual([sseId]);
    const next = await call(h.http().get('/api/v1/mcp-servers').query({ limit: 1, cursor: page.body.nextCursor }).set(alice.auth));
    expect(next.body.servers.map((s: { serverId: string }) => s.serverId)).toEqual([githubId]);
    const one = await get(alice, githubId);
    expect(one.body.server).toMatchObject({ serverId: githubId, hasCredentials: true, status: 'active' });
  });

  test('a draft is tested without being saved; a failed test is a result', async () => {
    const before = (await call(h.http().get('/api/v1/mcp-servers').set(alice.auth))).body.servers.length;
    const ok = await draft(alice, {
      name: 'Draft server',
      url: bearer.streamableUrl,
      transport: 'streamable_http',
      authentication: 'bearer',
      credentials: TOKEN,
      toolPolicies: { echo: 'deny' },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.result).toMatchObject({ ok: true, error: null, testedAt: expect.any(Number) });
    expect(ok.body.result.tools[0]).toMatchObject({ name: 'echo', namespacedName: 'draft-server__echo', policy: 'deny' });
    const refused = await draft(alice, {
      name: 'Draft',
      url: bearer.streamableUrl,
      transport: 'streamable_http',
      authentication: 'bearer',
      credentials: WRONG,
    });
    expect(refused.body).toEqual({
      result: { ok: false, tools: [], error: 'The MCP server answered 401 (check the credentials).', testedAt: expect.any(Number) },
    });
    const down = await draft(alice, { name: 'Down', url: 'http://127.0.0.1:9/mcp', transport: 'sse' });
    expect(down.body.result).toMatchObject({ ok: false, error: 'The MCP server could not be reached.' });
    expect((await call(h.http().get('/api/v1/mcp-servers').set(alice.auth))).body.servers).toHaveLength(before);
  });

  test('updates: policies, a rename that keeps the prefix, disabling and enabling (which reads the catalog)', async () => {
    const renamed = await patch(alice, {
      serverId: githubId,
      name: 'GitHub (work)',
      toolPolicies: { echo: 'allow', big: 'allow', hang: 'allow', picture: 'allow' },
      defaultToolPolicy: 'approval_required',
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body.server).toMatchObject({
      name: 'GitHub (work)',
      toolPrefix: 'github',
      toolPolicies: { echo: 'allow', big: 'allow', hang: 'allow', picture: 'allow' },
    });
    expect(renamed.body.server.tools.find((t: { name: string }) => t.name === 'fail').policy).toBe('approval_required');
    const requests = bearer.requests.length;
    const disabled = await patch(alice, { serverId: githubId, enabled: false });
    expect(disabled.body.server).toMatchObject({ enabled: false, status: 'active' });
    expect(bearer.requests.length).toBe(requests);
    const enabled = await patch(alice, { serverId: githubId, enabled: true });
    expect(enabled.body.server).toMatchObject({ enabled: true, status: 'active' });
    expect(bearer.requests.length).toBeGreaterThan(requests);
    expect(enabled.body.server.catalogRefreshedAt).toBeGreaterThanOrEqual(renamed.body.server.catalogRefreshedAt);
  });
});

describe('the tool source', () => {
  test('listTools: the enabled servers’ tools with their policies; servers in error are unavailable', async () => {
    const broken = await create(alice, { name: 'Broken', url: 'http://127.0.0.1:9/mcp', transport: 'streamable_http' });
    expect(broken.body.server).toMatchObject({ status: 'error', lastError: 'The MCP server could not be reached.' });
    const off = await create(alice, { name: 'Off', url: open.streamableUrl, transport: 'streamable_http', enabled: false });
    expect(off.body.server).toMatchObject({ status: 'untested', tools: [] });
    try {
      const { tools, unavailable } = await h.runtime.services.mcpTools.listTools(alice.userId);
      expect(tools.find((t) => t.name === 'github__echo')).toEqual({
        name: 'github__echo',
        description: 'Repeats the text it is given.',
        inputSchema: TOOLS[0]!.inputSchema,
        source: { type: 'mcp', serverId: githubId, serverName: 'GitHub (work)' },
        policy: 'allow',
      });
      expect(tools.find((t) => t.name === 'github-2__fail')?.policy).toBe('allow');
      expect(tools.filter((t) => t.source.type === 'mcp' && t.source.serverId === off.body.server.serverId)).toEqual([]);
      expect(unavailable).toEqual([
        { serverId: broken.body.server.serverId, serverName: 'Broken', reason: 'The MCP server could not be reached.' },
      ]);
      expect(await h.runtime.services.mcpTools.listTools(bob.userId)).toEqual({ tools: [], unavailable: [] });
    } finally {
      await remove(alice, broken.body.server.serverId);
      await remove(alice, off.body.server.serverId);
    }
  });

  test('callTool over both transports: text joined, other content summarized, isError passed on', async () => {
    const mcp = h.runtime.services.mcpTools;
    const options = { signal: controller(), maxResultBytes: 4096 };
    expect(await mcp.callTool(alice.userId, 'github__echo', { text: 'hello' }, options)).toEqual({ output: 'echo: hello', isError: false });
    expect(bearer.calls.at(-1)).toEqual({ name: 'echo', args: { text: 'hello' } });
    expect(await mcp.callTool(alice.userId, 'github-2__echo', { text: 'over sse' }, options)).toEqual({
      output: 'echo: over sse',
      isError: false,
    });
    expect(await mcp.callTool(alice.userId, 'github__picture', {}, options)).toEqual({
      output: '[image: image/png, 300 bytes]\na grey square',
      isError: false,
    });
    expect(await mcp.callTool(alice.userId, 'github-2__fail', {}, options)).toEqual({
      output: 'the tool failed on purpose',
      isError: true,
    });
    const odd = (await get(alice, githubId)).body.server.tools.find((t: { name: string }) => t.name === 'files.read/v2').namespacedName;
    expect(await mcp.callTool(alice.userId, odd, {}, options)).toEqual({ output: 'called files.read/v2', isError: false });
  });

  test('a tool returning 10 MB is cut to the cap; the transport cap and a denied tool are error results', async () => {
    const mcp = h.runtime.services.mcpTools;
    const result = await mcp.callTool(alice.userId, 'github__big', { bytes: 10_000_000 }, { signal: controller(), maxResultBytes: 16_384 });
    expect(result).toMatchObject({ isError: false, truncated: true });
    expect(Buffer.byteLength(result.output)).toBeLessThanOrEqual(16_384);
    expect(result.output).toMatch(/^x+\n\[output truncated: 10000000 bytes, only the first part is shown\]$/);

    // With a smaller cap on the answer itself, the exchange stops and the call is an error.
    const { capabilities } = h.runtime.services;
    const small = new McpToolSource({
      db: h.runtime.database.db,
      capabilities,
      exchanges: new McpExchanges({ capabilities, secrets: h.runtime.secrets, outbound: h.runtime.outbound, maxResponseBytes: 256 * 1024 }),
    });
    for (const name of ['github__big', 'github-2__big']) {
      const capped = await small.callTool(alice.userId, name, { bytes: 10_000_000 }, { signal: controller(), maxResultBytes: 16_384 });
      expect(capped).toEqual({ output: "The MCP server's answer is larger than 262144 bytes.", isError: true, truncated: true });
    }

    await patch(alice, {
      serverId: githubId,
      toolPolicies: { echo: 'allow', big: 'allow', hang: 'allow', picture: 'allow', fail: 'deny' },
    });
    const calls = bearer.calls.length;
    expect(await mcp.callTool(alice.userId, 'github__fail', {}, { signal: controller(), maxResultBytes: 100 })).toEqual({
      output: 'The tool github__fail is denied by its policy.',
      isError: true,
    });
    expect(bearer.calls.length).toBe(calls);
  });

  test('a tool that hangs ends at the server’s timeout (the server unavailable for the turn), or when the caller aborts', async () => {
    const mcp = h.runtime.services.mcpTools;
    await patch(alice, { serverId: githubId, timeoutMs: 1000 });
    try {
      const reason = 'The MCP server did not answer within 1000 ms.';
      expect(await mcp.callTool(alice.userId, 'github__hang', {}, { signal: controller(), maxResultBytes: 100 })).toEqual({
        output: reason,
        isError: true,
        unavailable: { serverId: githubId, serverName: 'GitHub (work)', reason },
      });
    } finally {
      await patch(alice, { serverId: githubId, timeoutMs: 30000 });
    }
    const abort = new AbortController();
    const pending = mcp.callTool(alice.userId, 'github__hang', {}, { signal: abort.signal, maxResultBytes: 100 });
    const calls = bearer.calls.filter((c) => c.name === 'hang').length;
    await waitFor(() => bearer.calls.filter((c) => c.name === 'hang').length > calls);
    abort.abort();
    expect(await pending).toEqual({ output: 'The call was cancelled.', isError: true });
  });

  test("unknown names, another user's tools and disabled servers are error results that call nothing", async () => {
    const mcp = h.runtime.services.mcpTools;
    const options = { signal: controller(), maxResultBytes: 100 };
    const calls = bearer.calls.length;
    expect(await mcp.callTool(bob.userId, 'github__echo', { text: 'x' }, options)).toEqual({
      output: 'There is no tool named github__echo.',
      isError: true,
    });
    expect(await mcp.callTool(alice.userId, 'github__nope', {}, options)).toEqual({
      output: 'There is no tool named github__nope.',
      isError: true,
    });
    expect(await mcp.callTool(alice.userId, 'knowledge_search', {}, options)).toEqual({
      output: 'There is no tool named knowledge_search.',
      isError: true,
    });
    await patch(alice, { serverId: githubId, enabled: false });
    try {
      expect(await mcp.callTool(alice.userId, 'github__echo', { text: 'x' }, options)).toEqual({
        output: 'The MCP server "GitHub (work)" is disabled.',
        isError: true,
      });
    } finally {
      await patch(alice, { serverId: githubId, enabled: true });
    }
    expect(bearer.calls.length).toBe(calls);
  });

  test('the exchanges are counted in the metrics', async () => {
    const res = await h.http().get('/metrics').set('Authorization', 'Bearer metrics-token-0123456789');
    expect(res.text).toMatch(/mcp_call_duration_seconds_count\{operation="call_tool",outcome="ok"\} [1-9]/);
    expect(res.text).toMatch(/mcp_call_duration_seconds_count\{operation="list_tools",outcome="ok"\} [1-9]/);
    expect(res.text).toMatch(/mcp_call_errors_total\{operation="call_tool",outcome="timeout"\} [1-9]/);
    expect(res.text).toMatch(/mcp_call_errors_total\{operation="list_tools",outcome="http_error"\} [1-9]/);
  });

  test('a server that keeps sessions: each exchange ends its session', async () => {
    const res = await create(alice, {
      name: 'Stateful',
      url: open.streamableUrl,
      transport: 'streamable_http',
      toolPolicies: { echo: 'allow' },
    });
    expect(res.body.server.status).toBe('active');
    const result = await h.runtime.services.mcpTools.callTool(
      alice.userId,
      'stateful__echo',
      { text: 'session' },
      { signal: controller(), maxResultBytes: 100 },
    );
    expect(result).toEqual({ output: 'echo: session', isError: false });
    expect(open.sessionsEnded).toBe(2);
    expect(open.openSessions()).toBe(0);
    expect(open.requests.filter((r) => r.method === 'DELETE')).toHaveLength(2);
    expect((await remove(alice, res.body.server.serverId)).status).toBe(200);
  });
});

describe('refusals', () => {
  test("another user's server is 404 on every route, and unchanged", async () => {
    const before = (await get(alice, githubId)).body.server;
    const attempts = [
      h.http().get('/api/v1/mcp-servers').query({ serverId: githubId }).set(bob.auth),
      h.http().patch('/api/v1/mcp-servers').set(bob.auth).send({ serverId: githubId, name: 'Mine now' }),
      h.http().delete('/api/v1/mcp-servers').query({ serverId: githubId }).set(bob.auth),
      h.http().delete('/api/v1/mcp-servers').set(bob.auth).send({ serverId: githubId }),
      h.http().post('/api/v1/mcp-servers/refresh').set(bob.auth).send({ serverId: githubId }),
    ];
    for (const attempt of attempts) {
      const res = await call(attempt);
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect((await call(h.http().get('/api/v1/mcp-servers').set(bob.auth))).body.servers).toEqual([]);
    expect((await get(alice, githubId)).body.server).toEqual(before);
  });

  test('private, link-local and metadata URLs are refused at create, update and test', async () => {
    for (const url of [
      'http://10.0.0.7/mcp',
      'http://169.254.169.254/latest',
      'http://[fd00:ec2::254]/mcp',
      'http://192.168.1.20/mcp',
      'ftp://example.com/mcp',
      'http://user:pw@93.184.215.14/mcp',
    ]) {
      const created = await create(alice, { name: 'LAN', url, transport: 'streamable_http' });
      expect(created.status).toBe(400);
      expect(created.body.details).toEqual([expect.objectContaining({ path: '/body/url' })]);
      expect((await patch(alice, { serverId: githubId, url })).status).toBe(400);
      expect((await draft(alice, { name: 'LAN', url, transport: 'sse' })).status).toBe(400);
    }
    expect((await get(alice, githubId)).body.server.url).toBe(bearer.streamableUrl);
  });

  test('bad input is 400 and changes nothing', async () => {
    const base = { name: 'Bad', url: open.streamableUrl, transport: 'streamable_http' };
    const invalid: Array<[Record<string, unknown>, string]> = [
      [{ ...base, authentication: 'oauth', integrationId: 'nosuch' }, '/body/integrationId'],
      [{ ...base, authentication: 'oauth', credentials: 'v' }, '/body/credentials'],
      [{ ...base, integrationId: 'github' }, '/body/integrationId'],
      [{ ...base, authentication: 'bearer' }, '/body/credentials'],
      [{ ...base, authentication: 'header', credentials: 'v' }, '/body/headerName'],
      [{ ...base, authentication: 'header', headerName: 'Content-Type', credentials: 'v' }, '/body/headerName'],
      [{ ...base, headerName: 'X-Key' }, '/body/headerName'],
      [{ ...base, credentials: 'v' }, '/body/credentials'],
      [{ ...base, transport: 'websocket' }, '/body/transport'],
      [{ ...base, timeoutMs: 10 }, '/body/timeoutMs'],
      [{ ...base, timeoutMs: 600000 }, '/body/timeoutMs'],
      [{ ...base, toolPolicies: { echo: 'maybe' } }, '/body/toolPolicies/echo'],
      [{ ...base, defaultToolPolicy: 'ask' }, '/body/defaultToolPolicy'],
      [{ ...base, name: '' }, '/body/name'],
      [{ name: 'x', transport: 'sse' }, '/body/url'],
      [{ ...base, extra: true }, '/body/extra'],
    ];
    const before = (await call(h.http().get('/api/v1/mcp-servers').set(alice.auth))).body.servers.length;
    for (const [body, path] of invalid) {
      const res = await create(alice, body);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(res.body.code).toBe('invalid_request');
      expect(res.body.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: expect.stringContaining(path) })]));
    }
    const current = (await get(alice, githubId)).body.server;
    for (const body of [
      {},
      { serverId: githubId, authentication: 'oauth', integrationId: 'nosuch' },
      { serverId: githubId, integrationId: 'github' },
      { serverId: githubId, credentials: null },
      { serverId: githubId, authentication: 'none', credentials: 'x' },
      { serverId: githubId, headerName: 'X-Key' },
      { serverId: githubId, enabled: 'yes' },
    ]) {
      expect((await patch(alice, body)).status).toBe(400);
    }
    expect((await patch(alice, { serverId: '01936d2e-7b1a-7c3e-9f00-5a2b9c4d1ea0', name: 'x' })).status).toBe(404);
    expect((await call(h.http().post('/api/v1/mcp-servers/refresh').set(alice.auth).send({}))).status).toBe(400);
    expect((await call(h.http().delete('/api/v1/mcp-servers').set(alice.auth))).status).toBe(400);
    expect((await draft(alice, { ...base, authentication: 'oauth', integrationId: 'nosuch' })).status).toBe(400);
    expect((await call(h.http().get('/api/v1/mcp-servers').set(alice.auth))).body.servers.length).toBe(before);
    expect((await get(alice, githubId)).body.server).toEqual(current);
  });

  test('credentials that cannot be an HTTP header value are 400 naming them at create, update and test; nothing is stored or sent', async () => {
    const odd = [
      `${TOKEN}\r\nX-Injected: 1`,
      `${TOKEN}\n`,
      `a\rb`,
      `a\u0000b`,
      `a\u007fb`,
      `a\u0001b`,
      `a\u2028b`,
      `token\u0100`,
      ` ${TOKEN}`,
      `${TOKEN}\t`,
    ];
    const before = (await call(h.http().get('/api/v1/mcp-servers').query({ limit: 100 }).set(alice.auth))).body.servers.length;
    const current = (await get(alice, githubId)).body.server;
    const sent = bearer.requests.length + header.requests.length;
    const refusedAt = (res: supertest.Response) => ({
      status: res.status,
      code: res.body.code,
      paths: ((res.body.details ?? []) as Array<{ path: string }>).map((d) => d.path),
    });
    const refused = { status: 400, code: 'invalid_request', paths: ['/body/credentials'] };
    for (const credentials of odd) {
      const bearerDraft = { name: 'Odd', url: bearer.streamableUrl, transport: 'streamable_http', authentication: 'bearer', credentials };
      const headerDraft = {
        name: 'Odd',
        url: header.sseUrl,
        transport: 'sse',
        authentication: 'header',
        headerName: 'X-Api-Key',
        credentials,
      };
      expect({ credentials, ...refusedAt(await create(alice, bearerDraft)) }).toEqual({ credentials, ...refused });
      expect({ credentials, ...refusedAt(await create(alice, headerDraft)) }).toEqual({ credentials, ...refused });
      expect({ credentials, ...refusedAt(await patch(alice, { serverId: githubId, credentials })) }).toEqual({ credentials, ...refused });
      expect({ credentials, ...refusedAt(await draft(alice, bearerDraft)) }).toEqual({ credentials, ...refused });
    }
    const [first] = (
      await create(alice, {
        name: 'Odd',
        url: bearer.streamableUrl,
        transport: 'streamable_http',
        authentication: 'bearer',
        credentials: 'a\nb',
      })
    ).body.details;
    expect(first.message).toMatch(/HTTP header value: no CR, LF/);
    expect((await call(h.http().get('/api/v1/mcp-servers').query({ limit: 100 }).set(alice.auth))).body.servers).toHaveLength(before);
    expect((await get(alice, githubId)).body.server).toEqual(current);
    expect(bearer.requests.length + header.requests.length).toBe(sent);
    // A tab inside, and Latin-1 text past ASCII, are valid header values.
    const latin = await create(alice, {
      name: 'Latin',
      url: bearer.streamableUrl,
      transport: 'streamable_http',
      authentication: 'bearer',
      credentials: 'caf\u00e9\ttoken',
      enabled: false,
    });
    expect(latin.status).toBe(200);
    expect((await remove(alice, latin.body.server.serverId)).status).toBe(200);
  });

  test('a user has at most MCP_SERVERS_PER_USER servers; Idempotency-Key replays a create', async () => {
    const carol = await h.newUser('carol');
    const body = { name: 'Off', url: open.streamableUrl, transport: 'streamable_http', enabled: false };
    const first = await call(h.http().post('/api/v1/mcp-servers').set(carol.auth).set('Idempotency-Key', 'create-off').send(body));
    const replay = await call(h.http().post('/api/v1/mcp-servers').set(carol.auth).set('Idempotency-Key', 'create-off').send(body));
    expect(replay.body).toEqual(first.body);
    for (let i = 1; i < LIMIT; i++) expect((await create(carol, { ...body, name: `Off ${i}` })).status).toBe(200);
    const over = await create(carol, body);
    expect(over.status).toBe(409);
    expect(over.body.code).toBe('conflict');
    expect((await call(h.http().get('/api/v1/mcp-servers').query({ limit: 100 }).set(carol.auth))).body.servers).toHaveLength(LIMIT);
  });

  test('the mcp capability switched off: every route answers capability_disabled, and no tool is offered or called', async () => {
    const off = await call(h.http().patch('/api/v1/admin/capabilities').set(admin.auth).send({ mcp: false }));
    expect(off.body.capabilities.mcp).toBe(false);
    try {
      const disabled = [
        h.http().get('/api/v1/mcp-servers').set(alice.auth),
        h.http().post('/api/v1/mcp-servers').set(alice.auth).send({ name: 'x', url: open.streamableUrl, transport: 'sse' }),
        h.http().patch('/api/v1/mcp-servers').set(alice.auth).send({ serverId: githubId, name: 'x' }),
        h.http().delete('/api/v1/mcp-servers').query({ serverId: githubId }).set(alice.auth),
        h.http().post('/api/v1/mcp-servers/refresh').set(alice.auth).send({ serverId: githubId }),
        h.http().post('/api/v1/mcp-servers/test').set(alice.auth).send({ name: 'x', url: open.streamableUrl, transport: 'sse' }),
      ];
      for (const attempt of disabled) {
        const res = await call(attempt);
        expect(res.status).toBe(403);
        expect(res.body).toMatchObject({
          code: 'capability_disabled',
          capability: 'mcp',
          error: 'MCP servers are disabled for this deployment.',
        });
      }
      const { tools, unavailable } = await h.runtime.services.mcpTools.listTools(alice.userId);
      expect(tools).toEqual([]);
      expect(unavailable.map((u) => u.serverId).sort()).toEqual([githubId, sseId].sort());
      const calls = bearer.calls.length;
      expect(
        await h.runtime.services.mcpTools.callTool(
          alice.userId,
          'github__echo',
          { text: 'x' },
          { signal: controller(), maxResultBytes: 100 },
        ),
      ).toEqual({
        output: 'MCP servers are disabled for this deployment.',
        isError: true,
      });
      expect(bearer.calls.length).toBe(calls);
    } finally {
      await call(h.http().patch('/api/v1/admin/capabilities').set(admin.auth).send({ mcp: true }));
    }
  });

  test('deleting a server removes its tools', async () => {
    const temp = await create(alice, { name: 'Temp', url: open.streamableUrl, transport: 'streamable_http' });
    expect((await h.runtime.services.mcpTools.listTools(alice.userId)).tools.some((t) => t.name === 'temp__echo')).toBe(true);
    const deleted = await call(h.http().delete('/api/v1/mcp-servers').set(alice.auth).send({ serverId: temp.body.server.serverId }));
    expect(deleted.body).toEqual({ serverId: temp.body.server.serverId, deleted: true });
    expect((await h.runtime.services.mcpTools.listTools(alice.userId)).tools.some((t) => t.name === 'temp__echo')).toBe(false);
    expect((await get(alice, temp.body.server.serverId)).status).toBe(404);
  });
});

describe('the credentials are never shown', () => {
  test('not in any response, log line or audit event; in the database only as ciphertext', async () => {
    const audit = await call(h.http().get('/api/v1/admin/audit').query({ limit: 200 }).set(admin.auth));
    const actions = (audit.body.events as Array<{ action: string }>).map((e) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['mcp_server.create', 'mcp_server.update', 'mcp_server.delete']));
    expect(bodies.length).toBeGreaterThan(50);
    expect(logLines.some((line) => line.includes('"operationId":"createMcpServer"'))).toBe(true);
    expect(logLines.some((line) => line.includes('MCP tool catalog could not be read'))).toBe(true);
    expect(logLines.some((line) => line.includes('MCP tool call failed'))).toBe(true);
    const stored = await sql<{
      credentials: string | null;
    }>`select credentials from mcp_servers where id in (${githubId}, ${sseId})`.execute(h.runtime.database.db);
    expect(stored.rows).toHaveLength(2);
    for (const { credentials } of stored.rows) expect(credentials).toMatch(/^s1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$/);
    const events = await sql<{ metadata: unknown }>`select metadata from audit_events`.execute(h.runtime.database.db);
    const everything = [...bodies, ...logLines, ...events.rows.map((r) => JSON.stringify(r.metadata))].join('\n');
    for (const secret of SECRETS) expect(everything).not.toContain(secret);
    // No address in the errors stored either.
    const errorsStored = await sql<{ last_error: string | null }>`select last_error from mcp_servers where last_error is not null`.execute(
      h.runtime.database.db,
    );
    for (const { last_error } of errorsStored.rows) expect(last_error).not.toMatch(/127\.0\.0\.1|localhost/);
  });
});

describe('MCP servers: the collection contract', () => {
  let contract: Harness;
  beforeAll(async () => {
    contract = await startHarness({ MCP_SERVERS_PER_USER: '100' });
  });
  afterAll(() => contract.close());
  describeCrudContract(
    {
      path: '/api/v1/mcp-servers',
      idField: 'serverId',
      one: 'server',
      many: 'servers',
      // Saved disabled: nothing is called.
      create: (n) => ({
        name: `Server ${n}`,
        url: 'https://93.184.215.14/mcp',
        transport: 'streamable_http',
        enabled: false,
        authentication: 'bearer',
        credentials: `token-${n}`,
      }),
      update: { name: 'Renamed', toolPolicies: { echo: 'allow' } },
      invalidCreates: [
        { name: 'x' },
        { name: 'x', url: 'https://93.184.215.14/mcp', transport: 'grpc' },
        { name: '', url: 'https://93.184.215.14/mcp', transport: 'sse' },
        { name: 'x', url: 'http://10.1.2.3/mcp', transport: 'sse' },
      ],
      invalidUpdates: [{ omitId: true }, { name: '' }, { toolPolicies: 'all' }, { url: 'http://10.1.2.3/mcp' }],
      projectScoped: false,
    },
    () => contract,
  );

  test('without OUTBOUND_ALLOW_LOOPBACK a loopback URL is refused', async () => {
    const user = await contract.newUser();
    for (const url of ['http://127.0.0.1/mcp', 'http://[::1]/mcp', 'http://localhost/sse']) {
      const res = await contract.http().post('/api/v1/mcp-servers').set(user.auth).send({ name: 'Local', url, transport: 'sse' });
      expect(res.status).toBe(400);
      expect(res.body.details).toEqual([{ path: '/body/url', message: expect.stringContaining('loopback') }]);
    }
    // And a server saved before (or a name that resolves to loopback later) is refused on every request.
    const saved = await h
      .http()
      .post('/api/v1/mcp-servers')
      .set(alice.auth)
      .send({ name: 'Loop', url: open.streamableUrl, transport: 'streamable_http' });
    const { capabilities, audit } = h.runtime.services;
    const db = h.runtime.database.db;
    const secrets = h.runtime.secrets;
    const outbound = new Outbound({ allowLoopback: false, allowedPorts: [] });
    const exchanges = new McpExchanges({ capabilities, secrets, outbound, maxResponseBytes: 1024 * 1024 });
    const strictOnH = new McpServerService({ db, capabilities, secrets, outbound, audit, exchanges, settings: { serversPerUser: LIMIT } });
    const strictTools = new McpToolSource({ db, capabilities, exchanges });
    const refreshed = await strictOnH.refresh(alice.userId, saved.body.server.serverId);
    expect(refreshed).toMatchObject({ status: 'error', last_error: "The MCP server's address is not allowed (a loopback address)." });
    const reason = "The MCP server's address is not allowed (a loopback address).";
    expect(await strictTools.callTool(alice.userId, 'loop__echo', { text: 'x' }, { signal: controller(), maxResultBytes: 100 })).toEqual({
      output: reason,
      isError: true,
      unavailable: { serverId: saved.body.server.serverId, serverName: 'Loop', reason },
    });
    await h.http().delete('/api/v1/mcp-servers').query({ serverId: saved.body.server.serverId }).set(alice.auth);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}
