import net from 'node:net';
import { AddressNotAllowed, addressRange, checkUrl, Outbound, resolveTarget, UrlNotAllowed } from '../../src/platform/net/outbound';
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

  test('a redirect is returned, never followed: one socket, to the receiver', async () => {
    const receiver = await startReceiver(() => ({ status: 302, headers: { Location: 'http://169.254.169.254/latest/meta-data' } }));
    try {
      const answer = await new Outbound(loopbackAllowed).request(receiver.url, { method: 'POST', body: '{}' }, { timeoutMs: 2000, maxBytes: 100 });
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
