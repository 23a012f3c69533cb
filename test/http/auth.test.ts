import { generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { DEV_AUDIENCE, DEV_ISSUER } from '../../src/platform/tokens';
import { type Harness, startHarness, type TestUser, sessionCookie } from '../helpers/harness';

let h: Harness;
let alice: TestUser;
let devKey: CryptoKey;

beforeAll(async () => {
  h = await startHarness({ ALLOWED_ORIGINS: 'https://app.example.com' });
  alice = await h.newUser('alice');
  devKey = h.runtime.devAuth!.privateKey;
});
afterAll(() => h.close());

const sign = (key: CryptoKey, claims: { sub?: string; iss?: string; aud?: string; exp?: number | string }, alg = 'ES256') => {
  let jwt = new SignJWT({}).setProtectedHeader({ alg }).setIssuedAt();
  if (claims.sub !== undefined) jwt = jwt.setSubject(claims.sub);
  jwt = jwt.setIssuer(claims.iss ?? DEV_ISSUER).setAudience(claims.aud ?? DEV_AUDIENCE);
  jwt = jwt.setExpirationTime(claims.exp ?? '1h');
  return jwt.sign(key);
};

async function expect401(headers: Record<string, string>) {
  const res = await h.http().get('/api/v1/notes').set(headers);
  expect(res.status).toBe(401);
  expect(res.body).toMatchObject({ code: 'unauthenticated', error: expect.any(String) });
}

describe('bearer tokens', () => {
  test('a valid token is accepted', async () => {
    expect((await h.http().get('/api/v1/notes').set(alice.auth)).status).toBe(200);
  });

  test('missing, malformed, expired, foreign and mis-addressed tokens are 401', async () => {
    const other = await generateKeyPair('ES256');
    const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(
      JSON.stringify({ sub: 'alice', iss: DEV_ISSUER, aud: DEV_AUDIENCE, exp: Math.floor(Date.now() / 1000) + 600 }),
    ).toString('base64url')}.`;
    const cases: Record<string, string>[] = [
      {},
      { Authorization: 'Basic YWxpY2U6c2VjcmV0' },
      { Authorization: 'Bearer' },
      { Authorization: 'Bearer not.a.jwt' },
      { Authorization: `Bearer ${none}` },
      { Authorization: `Bearer ${await sign(devKey, { sub: 'alice', exp: Math.floor(Date.now() / 1000) - 60 })}` },
      { Authorization: `Bearer ${await sign(other.privateKey, { sub: 'alice' })}` },
      { Authorization: `Bearer ${await sign(devKey, { sub: 'alice', iss: 'https://evil.example.com' })}` },
      { Authorization: `Bearer ${await sign(devKey, { sub: 'alice', aud: 'another-api' })}` },
      { Authorization: `Bearer ${await sign(devKey, {})}` },
      { Authorization: `${alice.auth.Authorization}x` },
    ];
    for (const headers of cases) await expect401(headers);
  });
});

describe('browser sessions', () => {
  test('a bearer token starts a session whose cookie authenticates /api/v1', async () => {
    const started = await h.http().post('/auth/session').set(alice.auth);
    expect(started.status).toBe(200);
    expect(started.body.session).toMatchObject({ userId: alice.userId, expiresAt: expect.any(Number) });
    const raw = ([] as string[]).concat(started.headers['set-cookie'] ?? []).join('\n');
    expect(raw).toMatch(/HttpOnly/);
    expect(raw).toMatch(/SameSite=Lax/);
    const cookie = sessionCookie(started.headers['set-cookie']);
    expect(decodeURIComponent(cookie)).toMatch(/^service_session=s:/);

    const listed = await h.http().get('/api/v1/notes').set('Cookie', cookie);
    expect(listed.status).toBe(200);
  });

  test('unsafe cookie requests need an allowed Origin (CSRF)', async () => {
    const cookie = sessionCookie((await h.http().post('/auth/session').set(alice.auth)).headers['set-cookie']);
    const noOrigin = await h.http().post('/api/v1/notes').set('Cookie', cookie).send({ title: 'csrf?' });
    expect(noOrigin.status).toBe(403);
    expect(noOrigin.body.code).toBe('forbidden');
    const foreign = await h
      .http()
      .post('/api/v1/notes')
      .set('Cookie', cookie)
      .set('Origin', 'https://evil.example.com')
      .send({ title: 'csrf?' });
    expect(foreign.status).toBe(403);
    const notes = await h.http().get('/api/v1/notes').query({ limit: 200 }).set('Cookie', cookie);
    expect(notes.body.notes.filter((n: { title: string }) => n.title === 'csrf?')).toHaveLength(0);

    const allowed = await h
      .http()
      .post('/api/v1/notes')
      .set('Cookie', cookie)
      .set('Origin', 'https://app.example.com')
      .send({ title: 'ok' });
    expect(allowed.status).toBe(200);
    const sameOrigin = await h
      .http()
      .post('/api/v1/notes')
      .set('Cookie', cookie)
      .set('Host', 'svc.local')
      .set('Origin', 'http://svc.local')
      .send({ title: 'ok' });
    expect(sameOrigin.status).toBe(200);
    // A bearer request needs no Origin.
    expect((await h.http().post('/api/v1/notes').set(alice.auth).send({ title: 'ok' })).status).toBe(200);
  });

  test('a tampered or unknown cookie is 401', async () => {
    const cookie = sessionCookie((await h.http().post('/auth/session').set(alice.auth)).headers['set-cookie']);
    const value = decodeURIComponent(cookie.slice('service_session='.length));
    const swap = (c: string) => (c === 'A' ? 'B' : 'A');
    const flip = (at: number) => `${value.slice(0, at)}${swap(value[at] as string)}${value.slice(at + 1)}`;
    for (const at of [5, value.length - 2]) await expect401({ Cookie: `service_session=${encodeURIComponent(flip(at))}` });
    await expect401({ Cookie: 'service_session=plain-unsigned-value' });
  });

  test('ending the session revokes the cookie', async () => {
    const cookie = sessionCookie((await h.http().post('/auth/session').set(alice.auth)).headers['set-cookie']);
    const ended = await h.http().delete('/auth/session').set('Cookie', cookie).set('Origin', 'https://app.example.com');
    expect(ended.status).toBe(200);
    expect(ended.body).toEqual({ ended: true });
    await expect401({ Cookie: cookie });
    expect((await h.http().delete('/auth/session').set(alice.auth)).status).toBe(401);
  });

  test('idle and expired sessions are 401', async () => {
    const db = h.runtime.database.db;
    const idle = sessionCookie((await h.http().post('/auth/session').set(alice.auth)).headers['set-cookie']);
    const expired = sessionCookie((await h.http().post('/auth/session').set(alice.auth)).headers['set-cookie']);
    const sessions = await db
      .selectFrom('sessions')
      .select(['token_hash', 'created_at'])
      .where('user_id', '=', alice.userId)
      .orderBy('created_at', 'desc')
      .limit(2)
      .execute();
    await db
      .updateTable('sessions')
      .set({ last_seen_at: new Date(Date.now() - 13 * 3600_000) })
      .where('token_hash', '=', sessions[1]!.token_hash)
      .execute();
    await db
      .updateTable('sessions')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('token_hash', '=', sessions[0]!.token_hash)
      .execute();
    await expect401({ Cookie: idle });
    await expect401({ Cookie: expired });
  });

  test('a session cannot be started with a cookie alone', async () => {
    const cookie = sessionCookie((await h.http().post('/auth/session').set(alice.auth)).headers['set-cookie']);
    const res = await h.http().post('/auth/session').set('Cookie', cookie).set('Origin', 'https://app.example.com');
    expect(res.status).toBe(401);
  });
});

describe('with an identity provider (production mode)', () => {
  test('its tokens authenticate, development tokens do not, and the cookie is Secure', async () => {
    const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
    const { exportSPKI } = await import('jose');
    const issue = (userId: string) =>
      new SignJWT({})
        .setProtectedHeader({ alg: 'RS256' })
        .setSubject(userId)
        .setIssuer('https://idp.example.com/')
        .setAudience('ai-workspace')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(privateKey);
    const prod = await startHarness(
      {
        NODE_ENV: 'production',
        MODEL_PROVIDER: 'development',
        AUTH_PUBLIC_KEY: await exportSPKI(publicKey),
        AUTH_ISSUER: 'https://idp.example.com/',
        AUTH_AUDIENCE: 'ai-workspace',
        AUTH_ALGORITHMS: 'RS256',
        COOKIE_SECRET: 'c'.repeat(40),
        SECRETS_KEY: `k1:${Buffer.alloc(32, 3).toString('base64')}`,
      },
      { sign: issue },
    );
    try {
      expect(prod.runtime.devAuth).toBeNull();
      const user = await prod.newUser('carol');
      expect((await prod.http().get('/api/v1/notes').set(user.auth)).status).toBe(200);
      expect((await prod.http().get('/api/v1/notes').set(alice.auth)).status).toBe(401);
      // Algorithm confusion: HS256 keyed with the public key's PEM text is not a valid token.
      const pem = await exportSPKI(publicKey);
      const confused = await new SignJWT({})
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject('carol')
        .setIssuer('https://idp.example.com/')
        .setAudience('ai-workspace')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode(pem));
      const refused = await prod.http().get('/api/v1/notes').set('Authorization', `Bearer ${confused}`);
      expect(refused.status).toBe(401);
      expect(refused.body.code).toBe('unauthenticated');
      const session = await prod.http().post('/auth/session').set(user.auth);
      expect(([] as string[]).concat(session.headers['set-cookie'] ?? []).join(';')).toMatch(/Secure/);
    } finally {
      await prod.close();
    }
  });
});
