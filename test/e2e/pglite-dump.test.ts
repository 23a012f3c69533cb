import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import supertest from 'supertest';
import { createRuntime } from '../../src/app';
import { loadConfig } from '../../src/config';
import { dumpPglite, openPglite } from '../../src/platform/db';
import { migrateToLatest } from '../../src/platform/db/migrate';
import { createLogger } from '../../src/platform/logger';
import { signDevToken } from '../../src/platform/tokens';

/**
 * docs/operations.md "Moving from PGlite to Postgres": an embedded database with records, dumped by
 * `make pglite-dump`'s function, loads into Postgres 15 with psql and the service reads the records
 * there (Postgres run); on the PGlite run the dump loads into a fresh embedded database.
 */
test('an embedded database moves to Postgres through its SQL dump', async () => {
  const dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-dump-')), 'pglite');
  const template = process.env.TEST_PGLITE_TEMPLATE;
  if (template) fs.cpSync(template, dir, { recursive: true });
  const database = await openPglite(dir);
  if (!template) await migrateToLatest(database.db);
  const config = loadConfig({ NODE_ENV: 'test', DATA_DIR: process.env.TEST_DATA_DIR, LOG_LEVEL: 'silent' });
  const runtime = await createRuntime(config, createLogger('silent'), database);
  const userId = `mover-${randomUUID()}`;
  const auth = { Authorization: `Bearer ${await signDevToken(runtime.devAuth!, userId)}` };
  const created = await supertest(runtime.app).post('/api/v1/notes').set(auth).send({ title: 'Moved', content: 'It came along.' });
  expect(created.status).toBe(200);
  await runtime.close();

  const targetUrl = process.env.TEST_DATABASE_URL;
  if (!targetUrl) {
    // No Postgres server in this run: the dump (with vectors) loads into a fresh embedded database.
    const { PGlite } = await import('@electric-sql/pglite');
    const { vector } = await import('@electric-sql/pglite-pgvector');
    const target = await PGlite.create({ extensions: { vector } });
    try {
      await target.exec(await dumpPglite(dir, { vectors: true }));
      const rows = await target.query<{ title: string }>('select title from public.notes');
      expect(rows.rows.map((r) => r.title)).toEqual(['Moved']);
    } finally {
      await target.close();
    }
    return;
  }
  const script = await dumpPglite(dir, { vectors: false });
  const name = `aiws_dump_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(targetUrl);
  url.pathname = `/${name}`;
  try {
    execFileSync('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '--single-transaction', '-d', url.toString(), '-f', '-'], {
      input: script,
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    const moved = await createRuntime({ ...config, databaseUrl: url.toString() }, createLogger('silent'));
    try {
      const listed = await supertest(moved.app).get('/api/v1/notes').set(auth);
      expect(listed.status).toBe(200);
      expect(listed.body.notes.map((n: { title: string }) => n.title)).toEqual(['Moved']);
    } finally {
      await moved.close();
    }
  } finally {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}, 600_000); // processes started from source: minutes each on a loaded machine
