import { createCipheriv, hkdfSync, randomBytes } from 'node:crypto';

/** A `v1:` value exactly as earlier versions sealed webhook signing secrets (key derived from `material`). */
export function sealV1(material: string, plain: string): string {
  const key = Buffer.from(hkdfSync('sha256', material, Buffer.alloc(0), 'webhook-signing-secrets', 32));
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return `v1:${Buffer.concat([nonce, cipher.getAuthTag(), sealed]).toString('base64url')}`;
}

/** A SECRETS_KEY entry: `<id>:<base64 of 32 bytes of fill>`. */
export function keyEntry(id: string, fill: number): string {
  return `${id}:${Buffer.alloc(32, fill).toString('base64')}`;
}
