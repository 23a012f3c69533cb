import { sql } from 'kysely';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import supertest from 'supertest';
import { type ApiClient, createApiClient } from '../../generated/client';
import { createRuntime, type Runtime } from '../../src/app';
import { createHttpServer } from '../../src/http/server';
import { loadConfig } from '../../src/config';
import { openPglite } from '../../src/platform/db';
import { createLogger, type Logger } from '../../src/platform/logger';
import { signDevToken } from '../../src/platform/tokens';

export interface TestUser {
  userId: string;
  token: string;
  auth: { Authorization: string };
  /** The typed client (openapi-fetch over generated/), authenticated as this user. */
  api: ApiClient;
}

export interface Harness {
  runtime: Runtime;
  baseUrl: string;
  /** supertest against the listening server, for raw and deliberately invalid requests. */
  http: () => supertest.Agent;
  newUser(prefix?: string): Promise<TestUser>;
  close(): Promise<void>;
}

let copies = 0;

const NO_LOAD_SHEDDING = { LOAD_SHED_MAX_IN_FLIGHT: '0', LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0' };

/**
 * A private copy of the run's migrated Postgres database (CREATE DATABASE … TEMPLATE), so that the
 * background workers of one test file never see another file's rows. Dropped at teardown.
 */
async function copyPostgresDatabase(): Promise<string> {
  const template = process.env.TEST_DATABASE_NAME as string;
  const name = `${template}_${randomUUID().replace(/-/g, '').slice(0, 12)}`; // module state restarts with every test file
  const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await admin.connect();
  try {
    for (let tries = 0; ; tries += 1) {
      try {
        await admin.query(`create database ${name} template ${template}`);
        break;
      } catch (error) {
        // Two workers copying the same template at once: the second waits its turn.
        if ((error as { code?: string }).code !== '55006' || tries > 50) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } finally {
    await admin.end();
  }
  const url = new URL(process.env.TEST_DATABASE_URL as string);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Starts the whole service as production runs it (response validation on, logs silent) on a
 * private copy of the run's migrated test database: Postgres when DATABASE_URL is set, otherwise
 * PGlite.
 */
export async function startHarness(
  env: Record<string, string> = {},
  options: { sign?: (userId: string) => Promise<string>; logger?: Logger } = {},
): Promise<Harness> {
  const config = loadConfig({
    NODE_ENV: 'test',
    DATA_DIR: process.env.TEST_DATA_DIR,
    DATABASE_URL: process.env.TEST_DATABASE_URL ? await copyPostgresDatabase() : undefined,
    LOG_LEVEL: 'silent',
    VALIDATE_RESPONSES: 'true',
    // The fuzzer and the concurrency tests send thousands of requests as one user.
    RATE_LIMIT_PER_MINUTE: '1000000',
    // …and many refused credentials (test/http/edge.test.ts sets a small limit).
    AUTH_FAILURES_PER_MINUTE: '1000000',
    // No load shedding: a loaded test machine runs late, and a test sends what it needs at once
    // (test/http/load-shed.test.ts turns it on).
    ...NO_LOAD_SHEDDING,
    ...env,
  });
  let database: Awaited<ReturnType<typeof openPglite>> | undefined;
  if (!config.databaseUrl) {
    const template = process.env.TEST_PGLITE_TEMPLATE as string;
    const copy = path.join(path.dirname(template), `pglite-${process.pid}-${(copies += 1)}`);
    fs.cpSync(template, copy, { recursive: true });
    database = await openPglite(copy);
  }
  const runtime = await createRuntime(
    config,
    options.logger ?? createLogger((process.env.TEST_LOG_LEVEL ?? 'silent') as Parameters<typeof createLogger>[0]),
    database,
  ).catch(async (error: unknown) => {
    await database?.close();
    throw error;
  });
  const server: Server = await new Promise((resolve) => {
    const s = createHttpServer(runtime.app, runtime.config.http).listen(0, '127.0.0.1', () => resolve(s));
  });
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const devAuth = runtime.devAuth;
  const sign = options.sign ?? (devAuth ? (userId: string) => signDevToken(devAuth, userId) : null);
  if (!sign) throw new Error('with an identity provider, pass a token signer to startHarness');

  return {
    runtime,
    baseUrl,
    http: () => supertest.agent(baseUrl),
    async newUser(prefix = 'user') {
      const userId = `${prefix}-${randomUUID()}`;
      const token = await sign(userId);
      return { userId, token, auth: { Authorization: `Bearer ${token}` }, api: createApiClient({ baseUrl, token }) };
    },
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await runtime.close();
    },
  };
}

/** The `service_session=…` pair of a response's Set-Cookie (the session cookie is Secure, so an agent over http keeps none). */
export function sessionCookie(setCookie: string[] | string | undefined): string {
  const header = ([] as string[]).concat(setCookie ?? []).find((c) => c.startsWith('service_session='));
  if (!header) throw new Error('no session cookie');
  return header.split(';')[0] as string;
}

/** A test user for a known user id (a bootstrap admin, say), signed with the development key. */
export async function userNamed(h: Harness, userId: string): Promise<TestUser> {
  const token = await signDevToken(h.runtime.devAuth!, userId);
  return { userId, token, auth: { Authorization: `Bearer ${token}` }, api: createApiClient({ baseUrl: h.baseUrl, token }) };
}

/**
 * Another service instance on the harness's database (its own Postgres pool, or the same PGlite),
 * without an HTTP server: for tests of work shared by instances. Close it before the harness.
 */
export async function anotherInstance(h: Harness, env: Record<string, string> = {}): Promise<Runtime> {
  const config = loadConfig({
    NODE_ENV: 'test',
    DATA_DIR: process.env.TEST_DATA_DIR,
    DATABASE_URL: h.runtime.config.databaseUrl ?? undefined,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '1000000',
    ...NO_LOAD_SHEDDING,
    ...env,
  });
  const shared = h.runtime.config.databaseUrl ? undefined : { ...h.runtime.database, close: async () => undefined };
  return createRuntime(config, createLogger('silent'), shared);
}

/**
 * Starts one harness for the test file, with a fresh user per name (`alice`, `bob`…), and closes it
 * after the file. `ctx.h` is the harness and `ctx.alice` a user; read them inside tests. `env` is
 * read when the harness starts (so it may name servers that other beforeAll hooks started).
 */
export function useHarnessWith<P extends string>(
  env: () => Record<string, string>,
  ...names: P[]
): { readonly h: Harness } & { readonly [K in P]: TestUser } {
  let harness: Harness | undefined;
  const users = new Map<string, TestUser>();
  beforeAll(async () => {
    harness = await startHarness(env());
    for (const name of names) users.set(name, await harness.newUser(name));
  });
  afterAll(() => harness?.close());
  const ctx = {};
  Object.defineProperty(ctx, 'h', { get: () => harness });
  for (const name of names) Object.defineProperty(ctx, name, { get: () => users.get(name) });
  return ctx as { readonly h: Harness } & { readonly [K in P]: TestUser };
}

export function useHarness<P extends string>(...names: P[]): { readonly h: Harness } & { readonly [K in P]: TestUser } {
  return useHarnessWith(() => ({}), ...names);
}

type BodyParser = Extract<Parameters<supertest.Test['parse']>[0], (res: never, callback: never) => void>;

/** A supertest parser that keeps a non-JSON body (YAML, NDJSON, CSV) as text. */
export const textBody: BodyParser = (res, callback) => {
  let body = '';
  res.on('data', (chunk: Buffer) => (body += chunk.toString()));
  res.on('end', () => callback(null, body));
};

/** A supertest parser that keeps the body as bytes. */
export const binaryBody: BodyParser = (res, callback) => {
  const parts: Buffer[] = [];
  res.on('data', (chunk: Buffer) => parts.push(chunk));
  res.on('end', () => callback(null, Buffer.concat(parts)));
};

/** Row counts of every table a request could write (not the audit log nor the rate limiter's counts). */
export async function tableRowCounts(h: Harness): Promise<Record<string, number>> {
  const tables = await sql<{ table_name: string }>`
    select table_name from information_schema.tables
    where table_schema = 'public' and table_type = 'BASE TABLE'
      and table_name not in ('audit_events', 'rate_limits', 'kysely_migration', 'kysely_migration_lock')
    order by table_name`.execute(h.runtime.database.db);
  const counts: Record<string, number> = {};
  for (const { table_name } of tables.rows) {
    const result = await sql<{ n: string }>`select count(*)::text as n from ${sql.table(table_name)}`.execute(h.runtime.database.db);
    counts[table_name] = Number(result.rows[0]?.n);
  }
  return counts;
}

/** Stops the instance's background work (deliveries, runs, schedules, indexing), so that only the test's requests change rows. */
export async function stopBackgroundWork(h: Harness): Promise<void> {
  const rt = h.runtime;
  await Promise.all([rt.dispatcher.stop(), rt.runner.stop(), rt.scheduler.stop(), rt.indexer.stop()]);
}

/** A turn's message as the messages list shows it: with its siblings, itself the only one. */
export function asListed(message: unknown): Record<string, unknown> {
  const listed = message as Record<string, unknown>;
  return { ...listed, siblingIds: [listed.messageId] };
}
