import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  type CryptoKey,
  createRemoteJWKSet,
  exportJWK,
  generateKeyPair,
  importJWK,
  importSPKI,
  type JWK,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
  errors as joseErrors,
  SignJWT,
} from 'jose';
import { writeOnce } from './paths';

/** Issuer and audience of the tokens of development mode (no identity provider configured). */
export const DEV_ISSUER = 'urn:ai-workspace-service:development';
export const DEV_AUDIENCE = 'ai-workspace-service';
const DEV_ALGORITHM = 'ES256';

export interface DevAuthMaterial {
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  cookieSecret: string;
}

/**
 * The development signing key and cookie secret, created under the data directory on first use and
 * reused afterwards, so tokens minted by `make token` keep working across restarts.
 */
export async function loadDevAuthMaterial(dataDir: string): Promise<DevAuthMaterial> {
  const dir = path.join(dataDir, 'dev-auth');
  const keyFile = path.join(dir, 'signing-key.jwk.json');
  const secretFile = path.join(dir, 'cookie-secret');
  if (!fs.existsSync(keyFile)) {
    const { privateKey } = await generateKeyPair(DEV_ALGORITHM, { extractable: true });
    writeOnce(keyFile, JSON.stringify({ ...(await exportJWK(privateKey)), alg: DEV_ALGORITHM }));
  }
  if (!fs.existsSync(secretFile)) writeOnce(secretFile, randomBytes(32).toString('base64url'));
  const jwk = JSON.parse(fs.readFileSync(keyFile, 'utf8')) as JWK;
  const { d: _private, ...publicJwk } = jwk;
  return {
    privateKey: (await importJWK(jwk, DEV_ALGORITHM)) as CryptoKey,
    publicKey: (await importJWK(publicJwk, DEV_ALGORITHM)) as CryptoKey,
    cookieSecret: fs.readFileSync(secretFile, 'utf8').trim(),
  };
}

/** A development token for `userId`, with any further `claims` (a groups claim, in tests). */
export async function signDevToken(
  material: DevAuthMaterial,
  userId: string,
  ttlSeconds = 12 * 3600,
  claims: Record<string, unknown> = {},
): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: DEV_ALGORITHM, typ: 'JWT' })
    .setSubject(userId)
    .setIssuer(DEV_ISSUER)
    .setAudience(DEV_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(material.privateKey);
}

/** A token that does not verify; the message says why in words a client can act on (RFC 6750 `error_description`). */
export class InvalidTokenError extends Error {}

/** The longest user id the service stores (a token's `sub`). */
export const MAX_USER_ID_LENGTH = 200;

/** A NUL, or a UTF-16 surrogate without its pair (which Postgres would store as U+FFFD). */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why jose refused a token, as the description a client sees. */
function describe(error: unknown): string {
  if (error instanceof joseErrors.JWTExpired) return 'The access token expired.';
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    if (error.claim === 'iss') return 'The access token was not issued by the identity provider this service trusts.';
    if (error.claim === 'aud') return 'The access token is not meant for this service (audience).';
    if (error.claim === 'nbf' || error.claim === 'iat') return 'The access token is not valid yet.';
    if (error.reason === 'missing') return `The access token has no ${error.claim} claim.`;
    return `The access token's ${error.claim} claim is not valid.`;
  }
  if (error instanceof joseErrors.JWSSignatureVerificationFailed || error instanceof joseErrors.JWKSNoMatchingKey) {
    return "The access token's signature is not valid.";
  }
  if (error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof joseErrors.JOSENotSupported) {
    return 'The access token is signed with an algorithm this service does not accept.';
  }
  if (error instanceof joseErrors.JWSInvalid || error instanceof joseErrors.JWTInvalid) return 'The access token is malformed.';
  return 'The access token could not be verified.';
}

export type TokenVerifier = (token: string) => Promise<string>;

/** The identity provider's settings the verifier needs (the configuration's `auth`). */
export interface TokenSettings {
  jwksUrl: string | null;
  publicKeyPem: string | null;
  issuer: string | null;
  audience: string | null;
  algorithms: string[];
}

/** Verified tokens remembered, at most this many, each for at most a minute and never past its expiry. */
const VERIFIED_CACHE_SIZE = 10_000;
const VERIFIED_CACHE_MS = 60_000;
const CLOCK_TOLERANCE_SECONDS = 5;

/** Runs when a token verified afresh (not when it was remembered), before its user is let in. */
export type OnVerified = (userId: string, payload: JWTPayload) => Promise<void>;

/**
 * Verifies bearer tokens: signature (keys imported once), issuer, audience, expiry and an explicit
 * algorithm allow-list. Resolves to the user id (`sub`). A client sends the same token with every
 * request, and checking its signature is most of an authenticated request's work, so a token that
 * verified is remembered (by its exact text) until its expiry or for a minute, whichever is first;
 * a token that failed is checked again each time. `onVerified` sees each token verified afresh
 * (its failure fails the request, and the token is not remembered).
 */
export async function createTokenVerifier(
  auth: TokenSettings,
  dev: DevAuthMaterial | null,
  now: () => number = Date.now,
  onVerified?: OnVerified,
): Promise<TokenVerifier> {
  let key: CryptoKey | JWTVerifyGetKey;
  let issuer: string;
  let audience: string;
  let algorithms: string[];
  if (auth.jwksUrl !== null || auth.publicKeyPem !== null) {
    algorithms = auth.algorithms;
    issuer = auth.issuer as string;
    audience = auth.audience as string;
    key = auth.jwksUrl ? createRemoteJWKSet(new URL(auth.jwksUrl)) : await importSPKI(auth.publicKeyPem as string, algorithms[0] as string);
  } else if (dev) {
    algorithms = [DEV_ALGORITHM];
    issuer = DEV_ISSUER;
    audience = DEV_AUDIENCE;
    key = dev.publicKey;
  } else {
    throw new Error('no identity provider and no development key');
  }
  const verified = new Map<string, { sub: string; until: number }>();
  return async (token) => {
    const at = now();
    const known = verified.get(token);
    if (known && known.until > at) return known.sub;
    if (known) verified.delete(token);
    let verifiedPayload: JWTPayload;
    let sub: string;
    try {
      const options = {
        issuer,
        audience,
        algorithms,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['sub', 'exp'],
        currentDate: new Date(at),
      };
      const { payload } = typeof key === 'function' ? await jwtVerify(token, key, options) : await jwtVerify(token, key, options);
      const subject = payload.sub;
      if (typeof subject !== 'string' || subject.length === 0 || subject.length > MAX_USER_ID_LENGTH || UNSTORABLE.test(subject)) {
        throw new InvalidTokenError(
          `The access token's subject is not a usable user id (1-${MAX_USER_ID_LENGTH} characters, no NUL or unpaired surrogate).`,
        );
      }
      verifiedPayload = payload;
      sub = subject;
    } catch (error) {
      if (error instanceof InvalidTokenError) throw error;
      throw new InvalidTokenError(describe(error));
    }
    // Outside the try: a failure here is the service's (the database), not the token's.
    await onVerified?.(sub, verifiedPayload);
    if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value as string);
    verified.set(token, {
      sub,
      until: Math.min(at + VERIFIED_CACHE_MS, ((verifiedPayload.exp as number) + CLOCK_TOLERANCE_SECONDS) * 1000),
    });
    return sub;
  };
}
