import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { loadConfig } from '../../src/config';
import { createTokenVerifier, InvalidTokenError } from '../../src/platform/tokens';

const ISSUER = 'https://idp.example.com/';
const AUDIENCE = 'ai-workspace';

const token = (key: CryptoKey | Uint8Array, alg: string, claims: { aud?: string; kid?: string } = {}) =>
  new SignJWT({})
    .setProtectedHeader({ alg, ...(claims.kid ? { kid: claims.kid } : {}) })
    .setSubject('alice')
    .setIssuer(ISSUER)
    .setAudience(claims.aud ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(key);

describe('identity provider tokens', () => {
  test('a PEM public key: RS256 tokens verify; other audiences and HS256 made with the PEM do not', async () => {
    const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
    const pem = await exportSPKI(publicKey);
    const config = loadConfig({ AUTH_PUBLIC_KEY: pem, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE, AUTH_ALGORITHMS: 'RS256' });
    const verify = await createTokenVerifier(config.auth, null);
    await expect(verify(await token(privateKey, 'RS256'))).resolves.toBe('alice');
    await expect(verify(await token(privateKey, 'RS256', { aud: 'other' }))).rejects.toBeInstanceOf(InvalidTokenError);
    const confused = await token(new TextEncoder().encode(pem), 'HS256');
    await expect(verify(confused)).rejects.toBeInstanceOf(InvalidTokenError);
  });

  test('a verified token is remembered until its expiry, never past it; a refused one is checked each time', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const config = loadConfig({
      AUTH_PUBLIC_KEY: await exportSPKI(publicKey),
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: AUDIENCE,
      AUTH_ALGORITHMS: 'ES256',
    });
    let clock = Date.now();
    const verify = await createTokenVerifier(config.auth, null, () => clock);
    const shortLived = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256' })
      .setSubject('bob')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(Math.floor(clock / 1000) + 30)
      .sign(privateKey);
    await expect(verify(shortLived)).resolves.toBe('bob');
    clock += 20_000;
    await expect(verify(shortLived)).resolves.toBe('bob');
    clock += 20_000; // past expiry and the 5 s tolerance: the remembered answer no longer counts
    await expect(verify(shortLived)).rejects.toBeInstanceOf(InvalidTokenError);
    const wrong = await token(privateKey, 'ES256', { aud: 'other' });
    for (let i = 0; i < 2; i += 1) await expect(verify(wrong)).rejects.toBeInstanceOf(InvalidTokenError);
  });

  test('onVerified sees each token verified afresh with its claims; its failure fails the call and is not remembered', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const config = loadConfig({
      AUTH_PUBLIC_KEY: await exportSPKI(publicKey),
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: AUDIENCE,
      AUTH_ALGORITHMS: 'ES256',
    });
    const seen: Array<[string, unknown]> = [];
    let failing = true;
    const verify = await createTokenVerifier(config.auth, null, Date.now, async (userId, payload) => {
      if (failing) throw new Error('the database is away');
      seen.push([userId, payload.groups]);
    });
    const withGroups = await new SignJWT({ groups: ['Research'] })
      .setProtectedHeader({ alg: 'ES256' })
      .setSubject('carol')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('5m')
      .sign(privateKey);
    const failure = await verify(withGroups).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Error);
    expect(failure).not.toBeInstanceOf(InvalidTokenError);
    failing = false;
    await expect(verify(withGroups)).resolves.toBe('carol');
    await expect(verify(withGroups)).resolves.toBe('carol');
    expect(seen).toEqual([['carol', ['Research']]]);
    await expect(verify(await token(privateKey, 'ES256', { aud: 'other' }))).rejects.toBeInstanceOf(InvalidTokenError);
    expect(seen).toHaveLength(1);
  });

  test('a JWKS URL: keys are chosen by kid', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const other = await generateKeyPair('ES256');
    const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] };
    const server = http.createServer((_req, res) => res.setHeader('content-type', 'application/json').end(JSON.stringify(jwks)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`;
      const config = loadConfig({ AUTH_JWKS_URL: url, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE });
      const verify = await createTokenVerifier(config.auth, null);
      await expect(verify(await token(privateKey, 'ES256', { kid: 'k1' }))).resolves.toBe('alice');
      await expect(verify(await token(other.privateKey, 'ES256', { kid: 'k1' }))).rejects.toBeInstanceOf(InvalidTokenError);
      await expect(verify(await token(other.privateKey, 'ES256', { kid: 'k2' }))).rejects.toBeInstanceOf(InvalidTokenError);
    } finally {
      server.close();
    }
  });
});
