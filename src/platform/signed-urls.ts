import { createHmac, randomUUID } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';

export type SignedPurpose = 'upload' | 'content';

export interface SignedGrant {
  userId: string;
  fileId: string;
  purpose: SignedPurpose;
  /** Unique per token: upload tokens are single-use by it. */
  jti: string;
  /** Declared size and type (upload tokens). */
  size?: number;
  type?: string;
  expiresAt: number;
}

export class SignedUrlExpiredError extends Error {}
export class SignedUrlInvalidError extends Error {}

const AUDIENCE = 'ai-workspace-service:signed-url';

/**
 * Tokens for the URLs this service hands out instead of object-store URLs: HMAC-signed (a key
 * derived from the cookie secret, so there is one secret to manage), short-lived, and bound to a
 * user, a file and a purpose.
 */
export class SignedUrls {
  private readonly key: Uint8Array;

  constructor(
    secret: string,
    readonly ttlSeconds: number,
  ) {
    this.key = createHmac('sha256', secret).update('signed-urls/v1').digest();
  }

  async sign(grant: Omit<SignedGrant, 'jti' | 'expiresAt'>): Promise<{ token: string; jti: string; expiresAt: number }> {
    const jti = randomUUID();
    const expiresAt = (Math.floor(Date.now() / 1000) + this.ttlSeconds) * 1000;
    const token = await new SignJWT({ fid: grant.fileId, pur: grant.purpose, sz: grant.size, typ: grant.type })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(grant.userId)
      .setAudience(AUDIENCE)
      .setJti(jti)
      .setExpirationTime(expiresAt / 1000)
      .sign(this.key);
    return { token, jti, expiresAt };
  }

  async verify(token: string): Promise<SignedGrant> {
    try {
      const { payload } = await jwtVerify(token, this.key, { algorithms: ['HS256'], audience: AUDIENCE, clockTolerance: 0 });
      const { sub, jti, exp, fid, pur, sz, typ } = payload as Record<string, unknown>;
      if (typeof sub !== 'string' || typeof jti !== 'string' || typeof fid !== 'string' || (pur !== 'upload' && pur !== 'content')) {
        throw new SignedUrlInvalidError('incomplete token');
      }
      return {
        userId: sub,
        fileId: fid,
        purpose: pur,
        jti,
        size: typeof sz === 'number' ? sz : undefined,
        type: typeof typ === 'string' ? typ : undefined,
        expiresAt: Number(exp) * 1000,
      };
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) throw new SignedUrlExpiredError('expired');
      if (error instanceof SignedUrlInvalidError) throw error;
      throw new SignedUrlInvalidError('invalid token');
    }
  }
}
