import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import type { Database } from './db';
import { writeOnce } from './paths';

/**
 * Secrets at rest: every secret the service keeps to use later (webhook signing secrets, users'
 * provider API keys, MCP credentials, integration tokens) is sealed here with AES-256-GCM. The
 * stored form is `s1:<key id>:<base64url of nonce, tag and ciphertext>`; the additional
 * authenticated data binds the ciphertext to its key id and to a context naming its purpose and
 * record, so a sealed value copied into another row (or column of another purpose) does not open.
 */
export interface SecretKey {
  /** Names the key in the stored form, so several keys can open while the first one seals. */
  id: string;
  key: Buffer;
}

/** A stored secret that cannot be opened: unknown key id, wrong key, another record's value, or not a sealed value. */
export class SecretUnreadable extends Error {
  override name = 'SecretUnreadable';
}

const FORMAT = 's1';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
/** The key id of the key derived from the deprecated WEBHOOK_SECRETS_KEY. */
export const LEGACY_KEY_ID = 'legacy';

/**
 * Parses SECRETS_KEY: comma-separated `<key id>:<base64 of 32 bytes>` entries (standard or URL
 * alphabet), the first of which seals. Problems never repeat a key's value.
 */
export function parseSecretKeys(value: string): { keys: SecretKey[]; problems: string[] } {
  const keys: SecretKey[] = [];
  const problems: string[] = [];
  const entries = value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  entries.forEach((entry, index) => {
    const colon = entry.indexOf(':');
    const id = colon < 0 ? '' : entry.slice(0, colon);
    const encoded = colon < 0 ? '' : entry.slice(colon + 1);
    const where = `SECRETS_KEY entry ${index + 1}`;
    if (!KEY_ID.test(id)) {
      problems.push(`${where} must be <key id>:<base64 key>, the key id 1 to 32 letters, digits, - or _ (such as k2026:…)`);
      return;
    }
    if (id === LEGACY_KEY_ID)
      problems.push(`${where}: the key id "${LEGACY_KEY_ID}" is reserved (the key derived from WEBHOOK_SECRETS_KEY)`);
    const key = /^[A-Za-z0-9+/_-]+={0,2}$/.test(encoded) ? Buffer.from(encoded.replace(/-/g, '+').replace(/_/g, '/'), 'base64') : null;
    if (!key || key.length !== 32) {
      problems.push(
        `${where} (key id "${id}"): the key must be 32 random bytes in base64, such as the output of \`openssl rand -base64 32\``,
      );
      return;
    }
    if (keys.some((known) => known.id === id)) problems.push(`${where}: the key id "${id}" is listed twice`);
    keys.push({ id, key });
  });
  if (entries.length === 0) problems.push('SECRETS_KEY must list at least one <key id>:<base64 key>');
  return { keys, problems };
}

/** A key derived from free-form key material (at least 32 characters), for the deprecated settings. */
export function keyFromMaterial(id: string, material: string, info = 'secrets-at-rest'): SecretKey {
  return { id, key: Buffer.from(hkdfSync('sha256', material, Buffer.alloc(0), info, 32)) };
}

/**
 * The development key: generated under the data directory on first use and reused afterwards
 * (the file holds one SECRETS_KEY entry, so it can be carried over into SECRETS_KEY).
 */
export function loadDevSecretKey(dataDir: string): SecretKey {
  const file = path.join(dataDir, 'dev-secrets', 'secrets-key');
  if (!fs.existsSync(file)) writeOnce(file, `dev:${randomBytes(32).toString('base64')}`);
  const { keys, problems } = parseSecretKeys(fs.readFileSync(file, 'utf8').trim());
  if (problems.length > 0 || !keys[0])
    throw new Error(`${file} does not hold a key: delete it to generate a new one (${problems.join('; ')})`);
  return keys[0];
}

export class Secrets {
  private readonly keys: Map<string, Buffer>;
  private readonly sealing: SecretKey;
  private readonly v1Key: Buffer | null;

  /**
   * `keys`: the first seals, all open. `v1Material`: the key material of the webhook secrets
   * sealed before this mechanism (`v1:` values: WEBHOOK_SECRETS_KEY, else the cookie secret),
   * still opened so an upgrade loses nothing; `rotate-secrets` re-seals them.
   */
  constructor(keys: readonly SecretKey[], v1Material: string | null = null) {
    const first = keys[0];
    if (!first) throw new Error('no key to seal secrets with');
    this.sealing = first;
    this.keys = new Map(keys.map((k) => [k.id, k.key]));
    this.v1Key = v1Material === null ? null : keyFromMaterial('v1', v1Material, 'webhook-signing-secrets').key;
  }

  /** The id of the key new secrets are sealed with. */
  get currentKeyId(): string {
    return this.sealing.id;
  }

  /** Seals `plain` for the purpose and record `context` (such as `webhook-signing-secret:<id>`). */
  seal(plain: string, context: string): string {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.sealing.key, nonce);
    cipher.setAAD(aad(this.sealing.id, context));
    const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${FORMAT}:${this.sealing.id}:${Buffer.concat([nonce, cipher.getAuthTag(), sealed]).toString('base64url')}`;
  }

  /** Opens a stored secret sealed for `context`; throws SecretUnreadable (its message holds no secret). */
  open(stored: string, context: string): string {
    if (stored.startsWith('v1:')) return this.openV1(stored);
    const [format, id, payload] = stored.split(':');
    if (format !== FORMAT || id === undefined || payload === undefined) throw new SecretUnreadable('not a sealed secret');
    const key = this.keys.get(id);
    if (!key) throw new SecretUnreadable(`sealed with key id "${id}", which SECRETS_KEY does not list`);
    const bytes = Buffer.from(payload, 'base64url');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, NONCE_BYTES));
      decipher.setAAD(aad(id, context));
      decipher.setAuthTag(bytes.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretUnreadable(`does not open with key id "${id}" for this record (a changed key, or a value moved from another record)`);
    }
  }

  /** Whether a stored secret is sealed with the current key (otherwise rotation re-seals it). */
  isCurrent(stored: string): boolean {
    return stored.startsWith(`${FORMAT}:${this.sealing.id}:`);
  }

  private openV1(stored: string): string {
    if (!this.v1Key)
      throw new SecretUnreadable('sealed in the webhook secrets format of earlier versions, with no key material to open it');
    const bytes = Buffer.from(stored.slice(3), 'base64url');
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.v1Key, bytes.subarray(0, NONCE_BYTES));
      decipher.setAuthTag(bytes.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretUnreadable('an earlier version sealed it with other key material (WEBHOOK_SECRETS_KEY or COOKIE_SECRET changed)');
    }
  }
}

function aad(keyId: string, context: string): Buffer {
  return Buffer.from(`${FORMAT}\u0000${keyId}\u0000${context}`, 'utf8');
}

/** A column holding sealed secrets, declared by the area that owns it, so rotation finds every one. */
export interface SealedColumn {
  table: string;
  idColumn: string;
  column: string;
  /** The context the value of row `id` is sealed for. */
  context: (id: string) => string;
}

export interface ResealReport {
  /** Values re-sealed with the current key. */
  resealed: number;
  /** Values that could not be opened (left as they are), by table and column. */
  unreadable: { table: string; column: string; id: string; reason: string }[];
}

/**
 * Re-seals every stored secret not yet sealed with the current key (older keys, the `v1:` webhook
 * format), in batches. A row changed meanwhile keeps its new value (the update matches the value
 * read). Safe to run again, and while the service runs.
 */
export async function resealAll(db: Database, secrets: Secrets, columns: readonly SealedColumn[], batch = 500): Promise<ResealReport> {
  const report: ResealReport = { resealed: 0, unreadable: [] };
  const current = `${FORMAT}:${secrets.currentKeyId}:%`;
  for (const { table, idColumn, column, context } of columns) {
    let after = '';
    for (;;) {
      const { rows } = await sql<{ id: string; value: string }>`
        select ${sql.ref(idColumn)}::text as id, ${sql.ref(column)} as value from ${sql.table(table)}
        where ${sql.ref(column)} is not null and ${sql.ref(column)} not like ${current} and ${sql.ref(idColumn)}::text > ${after}
        order by ${sql.ref(idColumn)}::text limit ${batch}`.execute(db);
      for (const { id, value } of rows) {
        let plain: string;
        try {
          plain = secrets.open(value, context(id));
        } catch (error) {
          report.unreadable.push({ table, column, id, reason: (error as Error).message });
          continue;
        }
        const updated = await sql`
          update ${sql.table(table)} set ${sql.ref(column)} = ${secrets.seal(plain, context(id))}
          where ${sql.ref(idColumn)}::text = ${id} and ${sql.ref(column)} = ${value}`.execute(db);
        report.resealed += Number(updated.numAffectedRows ?? 0);
      }
      if (rows.length < batch) break;
      after = (rows.at(-1) as { id: string }).id;
    }
  }
  return report;
}
