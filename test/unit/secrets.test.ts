import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { keyFromMaterial, loadDevSecretKey, Secrets, SecretUnreadable } from '../../src/platform/secrets';
import { sealV1 } from '../helpers/secrets';

const k1 = { id: 'k1', key: Buffer.alloc(32, 1) };
const k2 = { id: 'k2', key: Buffer.alloc(32, 2) };
const API_KEY = 'sk-proj-abcdefghijklmnopqrstuvwxyz0123456789';

describe('secrets at rest', () => {
  test('sealed as s1:<key id>:…, opened for the same context only', () => {
    const secrets = new Secrets([k1]);
    const stored = secrets.seal(API_KEY, 'model-connection:api-key:c1');
    expect(stored).toMatch(/^s1:k1:[A-Za-z0-9_-]+$/);
    expect(stored).not.toContain(API_KEY);
    expect(Buffer.from(stored.split(':')[2] as string, 'base64url').toString('latin1')).not.toContain('sk-proj');
    expect(secrets.seal(API_KEY, 'model-connection:api-key:c1')).not.toBe(stored); // a fresh nonce each time
    expect(secrets.open(stored, 'model-connection:api-key:c1')).toBe(API_KEY);
    // Another record's row, or another purpose: the authenticated data does not match.
    expect(() => secrets.open(stored, 'model-connection:api-key:c2')).toThrow(SecretUnreadable);
    expect(() => secrets.open(stored, 'mcp-server:credentials:c1')).toThrow(SecretUnreadable);
  });

  test('a tampered value, another key id or an unknown key id does not open; errors show no secret', () => {
    const both = new Secrets([k1, k2]);
    const stored = both.seal(API_KEY, 'ctx');
    const bytes = Buffer.from(stored.slice('s1:k1:'.length), 'base64url');
    bytes.writeUInt8(bytes.readUInt8(bytes.length - 1) ^ 1, bytes.length - 1);
    const failures = [
      () => both.open(`s1:k1:${bytes.toString('base64url')}`, 'ctx'),
      () => both.open(stored.replace('s1:k1:', 's1:k2:'), 'ctx'),
      () => new Secrets([k2]).open(stored, 'ctx'),
      () => both.open('plain text', 'ctx'),
    ];
    for (const fail of failures) {
      const error = (() => {
        try {
          fail();
        } catch (caught) {
          return caught as Error;
        }
        throw new Error('opened');
      })();
      expect(error).toBeInstanceOf(SecretUnreadable);
      expect(error.message).not.toContain(API_KEY);
    }
    expect(() => new Secrets([k2]).open(stored, 'ctx')).toThrow(/key id "k1", which SECRETS_KEY does not list/);
  });

  test('rotation: the first key seals, every listed key opens', () => {
    const old = new Secrets([k1]).seal(API_KEY, 'ctx');
    const rotated = new Secrets([k2, k1]);
    expect(rotated.currentKeyId).toBe('k2');
    expect(rotated.open(old, 'ctx')).toBe(API_KEY);
    expect(rotated.isCurrent(old)).toBe(false);
    const fresh = rotated.seal(API_KEY, 'ctx');
    expect(fresh.startsWith('s1:k2:')).toBe(true);
    expect(rotated.isCurrent(fresh)).toBe(true);
  });

  test('webhook secrets of earlier versions (v1:) open with the key material they were sealed with', () => {
    const material = 'the-cookie-secret-of-this-deployment-000';
    const v1 = sealV1(material, 'whsec_abc');
    expect(new Secrets([k1], material).open(v1, 'anything')).toBe('whsec_abc');
    expect(() => new Secrets([k1], 'another-material-of-at-least-32-chars').open(v1, 'x')).toThrow(SecretUnreadable);
    expect(() => new Secrets([k1]).open(v1, 'x')).toThrow(SecretUnreadable);
    // The deprecated WEBHOOK_SECRETS_KEY also yields a sealing key, the same from the same material.
    expect(keyFromMaterial('legacy', material).key).toEqual(keyFromMaterial('legacy', material).key);
    expect(keyFromMaterial('legacy', material).key).toHaveLength(32);
  });

  test('development generates one key under the data directory and reuses it', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'secrets-'));
    try {
      const first = loadDevSecretKey(dir);
      expect(first.id).toBe('dev');
      expect(first.key).toHaveLength(32);
      expect(loadDevSecretKey(dir).key).toEqual(first.key);
      const file = path.join(dir, 'dev-secrets', 'secrets-key');
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(fs.readFileSync(file, 'utf8')).toMatch(/^dev:[A-Za-z0-9+/]{43}=$/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
