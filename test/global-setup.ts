import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openPglite, openPostgres } from '../src/platform/db';
import { migrateToLatest } from '../src/platform/db/migrate';

/**
 * Prepares one migrated database for the run: with DATABASE_URL, a fresh database created on that
 * server (dropped again at teardown); without it, a migrated PGlite directory that each test file
 * copies. Also a data directory for the development signing key the tests mint tokens with.
 */
export default async function globalSetup(): Promise<void> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'aiws-test-'));
  process.env.TEST_ROOT = root;
  process.env.TEST_DATA_DIR = path.join(root, 'data');
  const url = process.env.DATABASE_URL;
  if (url) {
    const name = `aiws_test_${process.pid}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`create database ${name}`);
    await admin.end();
    const testUrl = new URL(url);
    testUrl.pathname = `/${name}`;
    process.env.TEST_DATABASE_URL = testUrl.toString();
    process.env.TEST_DATABASE_NAME = name;
    const database = await openPostgres(testUrl.toString(), { poolSize: 2 });
    await migrateToLatest(database.db);
    await database.close();
  } else {
    const template = path.join(root, 'pglite-template');
    const database = await openPglite(template);
    await migrateToLatest(database.db);
    await database.close();
    process.env.TEST_PGLITE_TEMPLATE = template;
  }
}
