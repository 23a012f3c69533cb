import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import {
  AddressNotAllowed,
  Outbound,
  OutboundTimeout,
  RedirectRefused,
  ResponseTooLarge,
  UrlNotAllowed,
} from '../../src/platform/net/outbound';
import { addressRange, checkUrl, type Resolver, resolveTarget } from '../../src/platform/net/targets';
import { startFakeModel } from '../helpers/openai-server';
import { startReceiver } from '../helpers/receiver';

const strict = { allowLoopback: false, allowedPorts: [] };
const loopbackAllowed = { allowLoopback: true, allowedPorts: [] };

describe('the outbound address guard', () => {
  // Process-wide: other test files' clients may connect meanwhile, so count sockets by port.
  let connect: jest.SpyInstance;
  const socketsTo = (port: number) =>
    connect.mock.calls.filter(([first]) => {
      const options: unknown = Array.isArray(first) ? first[0] : first; // http passes normalized [options, callback]
      return typeof options === 'object' && options !== null && Number((options as { port?: unknown }).port) === port;
    });
  beforeEach(() => {
    connect = jest.spyOn(net.Socket.prototype, 'connect');
  });
  afterEach(() => connect.mockRestore());

  test.each([
    ['http://127.0.0.1/hook', 'loopback'],
    ['http://[::1]/hook', 'loopback'],
    ['http://[::ffff:127.0.0.1]/hook', 'loopback'],
    ['http://[::ffff:a00:1]/hook', 'private'],
    ['http://0.0.0.0/hook', 'unspecified'],
    ['http://[::]/hook', 'unspecified'],
    ['http://10.0.0.1/hook', 'private'],
    ['http://172.16.5.4/hook', 'private'],
    ['http://192.168.1.10/hook', 'private'],
    ['http://169.254.169.254/latest/meta-data', 'linkLocal'],
    ['http://[fe80::1]/hook', 'linkLocal'],
    ['http://[fd00:ec2::254]/latest/meta-data', 'uniqueLocal'],
    ['http://100.100.100.200/latest/meta-data', 'carrierGradeNat'],
    ['http://192.0.0.192/opc/v1/instance', 'reserved'],
    ['http://224.0.0.1/hook', 'multicast'],
    ['http://2130706433/hook', 'loopback'],
    ['http://0x7f.1/hook', 'loopback'],
    ['http://[::7f00:1]/hook', 'reserved'],
    ['http://[64:ff9b::7f00:1]/hook', 'rfc6052'],
    ['http://localhost/hook', 'loopback'],
  ])('%s is refused (%s) without opening a socket', async (url, range) => {
    const refusal = await resolveTarget(url, strict, 2000).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(AddressNotAllowed);
    expect((refusal as AddressNotAllowed).range).toBe(range);
    expect(socketsTo(80)).toEqual([]);
  });

  test('public addresses are allowed; IPv4-mapped IPv6 is judged as its IPv4 address', () => {
    expect(addressRange('8.8.8.8')).toBe('unicast');
    expect(addressRange('2606:4700:4700::1111')).toBe('unicast');
    expect(addressRange('::ffff:8.8.8.8')).toBe('unicast');
    expect(addressRange('::ffff:169.254.169.254')).toBe('linkLocal');
  });

  test('only http(s) on the default port (or an allowed one), without credentials or fragment', () => {
    expect(() => checkUrl('ftp://8.8.8.8/x', strict)).toThrow(UrlNotAllowed);
    expect(() => checkUrl('file:///etc/passwd', strict)).toThrow(UrlNotAllowed);
    expect(() => checkUrl('https://user:pw@8.8.8.8/x', strict)).toThrow(UrlNotAllowed);
    expect(() => checkUrl('https://8.8.8.8/x#f', strict)).toThrow(UrlNotAllowed);
    expect(() => checkUrl('https://8.8.8.8:8443/x', strict)).toThrow(/port 8443/);
    expect(checkUrl('https://8.8.8.8:8443/x', { allowLoopback: false, allowedPorts: [8443] }).port).toBe('8443');
    expect(checkUrl('https://8.8.8.8:443/x', strict).port).toBe('');
    expect(() => checkUrl('http://127.0.0.1:9999/x', strict)).toThrow(AddressNotAllowed);
    expect(checkUrl('http://127.0.0.1:9999/x', loopbackAllowed).port).toBe('9999');
    expect(() => checkUrl('http://10.0.0.1:9999/x', loopbackAllowed)).toThrow(AddressNotAllowed);
  });

  test('with loopback allowed, a name on another port must resolve to loopback only', async () => {
    const resolver: Resolver = async (host) => [{ address: host === 'local.test' ? '127.0.0.1' : '8.8.8.8', family: 4 }];
    await expect(resolveTarget('http://local.test:9999/x', loopbackAllowed, 2000, resolver)).resolves.toMatchObject({
      address: '127.0.0.1',
    });
    await expect(resolveTarget('http://public.test:9999/x', loopbackAllowed, 2000, resolver)).rejects.toThrow(/port 9999 is not allowed/);
    await expect(resolveTarget('http://public.test:9999/x', strict, 2000, resolver)).rejects.toThrow(/port 9999 is not allowed/);
  });

  test('a redirect is returned, never followed: one socket, to the receiver', async () => {
    const receiver = await startReceiver(() => ({ status: 302, headers: { Location: 'http://169.254.169.254/latest/meta-data' } }));
    try {
      const answer = await new Outbound(loopbackAllowed).request(
        receiver.url,
        { method: 'POST', body: '{}' },
        { timeoutMs: 2000, maxBytes: 100 },
      );
      expect(answer.status).toBe(302);
      expect(answer.headers.location).toBe('http://169.254.169.254/latest/meta-data');
      expect(socketsTo(Number(new URL(receiver.url).port))).toHaveLength(1);
      expect(socketsTo(80)).toEqual([]);
      expect(receiver.connections()).toBe(1);
    } finally {
      await receiver.close();
    }
  });
});

describe('the guarded fetch and request', () => {
  let server: http.Server;
  let port = 0;
  const seen: { path: string; host?: string; method?: string; body: string; headers: http.IncomingHttpHeaders }[] = [];
  const TEN_MB = 10 * 1024 * 1024;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (chunk: Buffer) => parts.push(chunk));
      req.on('end', () => {
        seen.push({
          path: req.url ?? '',
          host: req.headers.host,
          method: req.method,
          body: Buffer.concat(parts).toString(),
          headers: req.headers,
        });
        if (req.url === '/echo') {
          res.writeHead(200, { 'content-type': 'application/json', 'x-seen': 'yes' });
          res.end(JSON.stringify({ method: req.method, body: Buffer.concat(parts).toString(), contentType: req.headers['content-type'] }));
        } else if (req.url === '/redirect') {
          res.writeHead(307, { Location: 'http://169.254.169.254/latest/meta-data' });
          res.end();
        } else if (req.url === '/hang') {
          // never answers
        } else if (req.url === '/stall') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('the start, then nothing');
        } else if (req.url === '/big') {
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          const chunk = Buffer.alloc(64 * 1024, 120);
          let sent = 0;
          const more = () => {
            while (sent < TEN_MB) {
              sent += chunk.length;
              if (!res.write(chunk)) return void res.once('drain', more);
            }
            res.end();
          };
          res.on('close', () => (sent = TEN_MB));
          more();
        } else {
          res.writeHead(204);
          res.end();
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const limits = { timeoutMs: 10_000, maxBytes: 1024 * 1024 };

  /** Answers each look-up of a name from a script: the first answer, then the next… (the last one repeats). */
  const scripted = (answers: Record<string, string[][]>) => {
    const calls: string[] = [];
    const resolver: Resolver = async (host) => {
      calls.push(host);
      const script = answers[host] ?? [];
      const answer = script[Math.min(calls.filter((h) => h === host).length - 1, script.length - 1)] ?? [];
      if (answer.length === 0) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      return answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    };
    return { resolver, calls };
  };

  test('a request goes to the address checked for it: the name is resolved once per request, never again', async () => {
    // DNS rebinding: the name first resolves to the (allowed) test server, then to a private address.
    const dns = scripted({ 'rebind.test': [['127.0.0.1'], ['10.0.0.7']] });
    const guardedFetch = new Outbound(loopbackAllowed, dns.resolver).fetcher(limits);
    const res = await guardedFetch(`http://rebind.test:${port}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-seen')).toBe('yes');
    expect(await res.json()).toEqual({ method: 'POST', body: '{"a":1}', contentType: 'application/json' });
    expect(seen.at(-1)?.host).toBe(`rebind.test:${port}`);
    expect(dns.calls).toEqual(['rebind.test']);
    const before = seen.length;
    const refusal = await guardedFetch(`http://rebind.test:${port}/echo`).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(AddressNotAllowed);
    expect((refusal as Error).message).toBe('rebind.test resolves to 10.0.0.7, a private address');
    expect(dns.calls).toEqual(['rebind.test', 'rebind.test']);
    expect(seen.length).toBe(before);
  });

  test.each([
    ['a private address', { 'inside.test': [['10.1.2.3']] }, 'private'],
    ['one public and one metadata address', { 'inside.test': [['8.8.8.8', '169.254.169.254']] }, 'linkLocal'],
    ['loopback without the development setting', { 'inside.test': [['127.0.0.1']] }, 'loopback'],
    ['an IPv4-mapped loopback address', { 'inside.test': [['::ffff:127.0.0.1']] }, 'loopback'],
  ])('a name resolving to %s is refused without a socket', async (_, answers, range) => {
    const guardedFetch = new Outbound({ allowLoopback: false, allowedPorts: [port] }, scripted(answers).resolver).fetcher(limits);
    const connect = jest.spyOn(net.Socket.prototype, 'connect');
    try {
      const refusal = await guardedFetch(`http://inside.test:${port}/echo`).catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(AddressNotAllowed);
      expect((refusal as AddressNotAllowed).range).toBe(range);
      expect(connect).not.toHaveBeenCalled();
    } finally {
      connect.mockRestore();
    }
  });

  test('the save-time check refuses what the guard refuses and accepts a name that does not resolve yet', async () => {
    const outbound = new Outbound(strict, scripted({ 'inside.test': [['10.1.2.3']] }).resolver);
    expect(await outbound.whyRefused('https://inside.test/v1')).toBe('inside.test resolves to 10.1.2.3, a private address');
    expect(await outbound.whyRefused('ftp://example.com/')).toBe('must use http or https');
    expect(await outbound.whyRefused('https://not-yet.test/v1')).toBeNull();
  });

  test('a redirect is refused, not followed', async () => {
    const guardedFetch = new Outbound(loopbackAllowed).fetcher(limits);
    const before = seen.length;
    const refusal = await guardedFetch(`http://127.0.0.1:${port}/redirect`).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(RedirectRefused);
    expect((refusal as RedirectRefused).status).toBe(307);
    expect((refusal as Error).message).toContain('169.254.169.254');
    expect(seen.length).toBe(before + 1);
  });

  test('a server that never answers, or stalls in the body, meets the timeout', async () => {
    const guardedFetch = new Outbound(loopbackAllowed).fetcher({ timeoutMs: 300, maxBytes: 1024 });
    await expect(guardedFetch(`http://127.0.0.1:${port}/hang`)).rejects.toBeInstanceOf(OutboundTimeout);
    // The answer's head arrives, then the body stalls: reading it meets the same timeout.
    await expect(guardedFetch(`http://127.0.0.1:${port}/stall`).then((stalled) => stalled.text())).rejects.toBeInstanceOf(OutboundTimeout);
    await expect(
      new Outbound(loopbackAllowed).request(`http://127.0.0.1:${port}/hang`, {}, { timeoutMs: 300, maxBytes: 1024 }),
    ).rejects.toThrow('timeout after 300 ms');
  });

  test('a 10 MB body: fetch errors past the cap, request keeps the cap and says it was cut', async () => {
    const outbound = new Outbound(loopbackAllowed);
    const res = await outbound.fetcher(limits)(`http://127.0.0.1:${port}/big`);
    await expect(res.arrayBuffer()).rejects.toBeInstanceOf(ResponseTooLarge);
    const cut = await outbound.request(`http://127.0.0.1:${port}/big`, {}, limits);
    expect(cut).toMatchObject({ status: 200, truncated: true });
    expect(cut.body).toHaveLength(limits.maxBytes);
    const whole = await outbound.request(`http://127.0.0.1:${port}/big`, {}, { timeoutMs: 30_000, maxBytes: 11 * 1024 * 1024 });
    expect(whole).toMatchObject({ status: 200, truncated: false });
    expect(whole.body).toHaveLength(TEN_MB);
  });

  test('an aborted signal ends the request', async () => {
    const controller = new AbortController();
    const pending = new Outbound(loopbackAllowed).fetcher(limits)(`http://127.0.0.1:${port}/hang`, { signal: controller.signal });
    controller.abort(new Error('the caller went away'));
    await expect(pending).rejects.toThrow('the caller went away');
  });

  test('the AI SDK calls a model through it (and is refused a private address)', async () => {
    const fake = await startFakeModel();
    try {
      const [ai, { createOpenAICompatible }] = await Promise.all([import('ai'), import('@ai-sdk/openai-compatible')]);
      const provider = (outbound: Outbound) =>
        createOpenAICompatible({ name: 'byok', baseURL: fake.baseUrl, apiKey: 'sk-test', fetch: outbound.fetcher(limits) });
      const result = await ai.generateText({
        model: provider(new Outbound(loopbackAllowed)).chatModel('llama3.1:8b'),
        prompt: 'Hi',
        maxRetries: 0,
      });
      expect(result.text).toBe('Hello there.');
      expect(fake.requests.at(-1)?.authorization).toBe('Bearer sk-test');
      const refused = ai.generateText({ model: provider(new Outbound(strict)).chatModel('llama3.1:8b'), prompt: 'Hi', maxRetries: 0 });
      await expect(refused).rejects.toThrow(/loopback address/);
    } finally {
      await fake.close();
    }
  });
});
