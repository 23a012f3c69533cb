import net from 'node:net';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { describeProviderError } from '../../src/platform/ai/models';
import { migrateToLatest } from '../../src/platform/db/migrate';
import { connectionFailure } from '../../src/platform/net/failures';
import { useHarnessWith } from '../helpers/harness';

/** A loopback port nothing listens on: taken, then given back. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });

describe('a failed connection is named by its cause', () => {
  test('the code is found on the error, as the cause of fetch failed, and inside an AggregateError', () => {
    const reason = 'the connection was refused (nothing listens at that address and port)';
    expect(connectionFailure(refused())).toEqual({ code: 'ECONNREFUSED', reason });
    expect(connectionFailure(new TypeError('fetch failed', { cause: refused() }))).toEqual({ code: 'ECONNREFUSED', reason });
    expect(connectionFailure(Object.assign(new AggregateError([refused(), refused()]), { code: undefined }))).toEqual({
      code: 'ECONNREFUSED',
      reason,
    });
    expect(connectionFailure(Object.assign(new Error('getaddrinfo ENOTFOUND x.invalid'), { code: 'ENOTFOUND' }))?.reason).toBe(
      'the host name does not resolve',
    );
    expect(connectionFailure(new Error('unexpected token'))).toBeNull();
    expect(connectionFailure(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBeNull();
  });

  test('a refused connection to a model provider says so, not that its answer could not be read, and names no address', () => {
    // The outbound guard's fetch (node:http) throws the socket's error itself; fetch wraps it.
    for (const error of [refused(), new TypeError('fetch failed', { cause: refused() })]) {
      const said = describeProviderError(error);
      expect(said).toBe('The model provider could not be reached: the connection was refused (nothing listens at that address and port).');
      expect(said).not.toMatch(/127\.0\.0\.1|ECONNREFUSED/);
    }
    expect(describeProviderError(new SyntaxError('Unexpected token < in JSON'))).toBe("The model provider's answer could not be read.");
  });

  test('a database that refuses connections at start is named as such, not as migration (unknown)', async () => {
    const port = await closedPort();
    const db = new Kysely<unknown>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` }) }),
    });
    try {
      const failure = (await migrateToLatest(db).then(
        () => null,
        (error: unknown) => error as Error,
      ))!;
      expect(failure).toBeInstanceOf(Error);
      expect(failure.message).toMatch(/^the database could not be reached: the connection was refused .*ECONNREFUSED.*check DATABASE_URL/);
      expect(failure.message).not.toContain('(unknown)');
    } finally {
      await db.destroy();
    }
  });
});

describe('the connection test of a model provider that is not running', () => {
  const ctx = useHarnessWith(() => ({ OUTBOUND_ALLOW_LOOPBACK: 'true' }), 'alice');

  test('says the connection was refused', async () => {
    const port = await closedPort();
    for (const kind of ['openai_compatible', 'openai', 'anthropic', 'google']) {
      const res = await ctx.h
        .http()
        .post('/api/v1/model-providers/test')
        .set(ctx.alice.auth)
        .send({ kind, baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-test' });
      expect(res.status).toBe(200);
      expect(res.body.result).toMatchObject({
        ok: false,
        error: 'The model provider could not be reached: the connection was refused (nothing listens at that address and port).',
      });
    }
  });
});
