import fs from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { PGliteDialect } from 'kysely-pglite-dialect';
import type { DB } from '../../../generated/db';
import { type Notifications, pgliteNotifications, postgresNotifications } from './notifications';

export type Database = Kysely<DB>;
export type { DB };

export interface DatabaseHandle {
  db: Database;
  kind: 'postgres' | 'pglite';
  /** The connection pool (Postgres), for the few libraries that take one (the shared rate limit); undefined on PGlite. */
  pool?: pg.Pool;
  /** The connection pool's state (Postgres), or null (PGlite has no pool). */
  poolStats(): { total: number; idle: number; waiting: number } | null;
  /** Postgres `LISTEN` / `NOTIFY` between instances (a dedicated client on Postgres, PGlite's own on PGlite). */
  notifications: Notifications;
  close(): Promise<void>;
}

// int8 (counts, sums) as numbers, as PGlite returns them; values stay far below 2^53 here.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/** What the pool reports of a client that lost its server (a restart, a failover, an idle cut). */
export type ConnectionErrorListener = (error: Error) => void;

export interface PoolOptions {
  poolSize: number;
  /** How long a new connection may take before the query that needed it fails (5 s). */
  connectTimeoutMs?: number;
  onConnectionError?: ConnectionErrorListener;
}

/**
 * Kysely's PostgresDialect over a pg.Pool. A client that loses its server emits `error`, and an
 * `error` event nobody listens to ends the process. Every client gets a listener of its own as it
 * connects, which reports the loss, so that one checked out by a query or a transaction when the
 * server goes away fails that query instead; the pool drops an idle one and passes its error on to
 * `pool.on('error')`, which needs a listener too (the client's has reported it already).
 */
export async function openPostgres(url: string, options: PoolOptions): Promise<DatabaseHandle> {
  const { poolSize, connectTimeoutMs = 5000, onConnectionError = () => undefined } = options;
  const pool = new pg.Pool({ connectionString: url, max: poolSize, connectionTimeoutMillis: connectTimeoutMs });
  pool.on('connect', (client) => client.on('error', onConnectionError));
  pool.on('error', () => undefined);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  const notifications = postgresNotifications(url, onConnectionError);
  return {
    db,
    kind: 'postgres',
    pool,
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    notifications,
    close: async () => {
      await notifications.close();
      await db.destroy();
    },
  };
}

/**
 * Claims `dir` for this process: PGlite is one process's database, and a second process opening the
 * same files (a second `make run`, or `make admin` while the service runs) would corrupt them.
 */
function claimDirectory(dir: string): () => void {
  const lockFile = `${dir}.lock`;
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  for (;;) {
    try {
      fs.writeFileSync(lockFile, String(process.pid), { flag: 'wx' });
      return () => fs.rmSync(lockFile, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = Number(fs.readFileSync(lockFile, 'utf8'));
    let alive = false;
    try {
      alive = Number.isInteger(owner) && owner > 0 && owner !== process.pid && process.kill(owner, 0);
    } catch {
      alive = false;
    }
    if (alive) {
      throw new Error(`the embedded database in ${dir} is in use by process ${owner}: stop it first, or set DATABASE_URL`);
    }
    fs.rmSync(lockFile, { force: true }); // left by a process that is gone
  }
}

/**
 * The embedded database's buffer cache. Postgres's default 128 MB would be resident from start-up
 * (in WebAssembly memory, which is never given back), a large part of an idle instance; its data
 * files are read through the operating system's page cache either way (docs/performance.md).
 */
const EMBEDDED_SHARED_BUFFERS = '16MB';

/**
 * A PGlite instance on `dir` (in memory when null) with pgvector and the service's buffer cache.
 * The CommonJS builds (which the dialect's types name) are loaded only here: a service on Postgres
 * never carries the embedded database's code.
 */
async function createPglite(dir: string | null): Promise<import('@electric-sql/pglite').PGlite> {
  const { PGlite } = require('@electric-sql/pglite') as typeof import('@electric-sql/pglite');
  const { vector } = require('@electric-sql/pglite-pgvector') as typeof import('@electric-sql/pglite-pgvector');
  return PGlite.create(dir ?? undefined, {
    extensions: { vector },
    startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${EMBEDDED_SHARED_BUFFERS}`],
  });
}

/**
 * The embedded database in `dir` as a SQL script (pg_dump's plain format) that `psql` of Postgres
 * 15 or later loads into an empty database: without the settings newer than 15 that pg_dump writes,
 * and, with `vectors: false`, without pgvector and the embeddings (a server without the extension;
 * the indexer embeds again where vector search is available). The directory must not be in use.
 */
export async function dumpPglite(dir: string, options: { vectors: boolean }): Promise<string> {
  const release = claimDirectory(dir);
  try {
    const pglite = await createPglite(dir);
    try {
      const { pgDump } = require('@electric-sql/pglite-tools/pg_dump') as typeof import('@electric-sql/pglite-tools/pg_dump');
      const args = ['--no-owner', '--no-privileges', ...(options.vectors ? [] : ['--exclude-table=public.knowledge_embeddings'])];
      const text = await (await pgDump({ pg: pglite, args })).text();
      return text
        .split('\n')
        .filter((line) => !/^SET transaction_timeout\b/.test(line) && !/^\\(un)?restrict\b/.test(line))
        .filter((line) => options.vectors || !/^(CREATE|COMMENT ON) EXTENSION (IF NOT EXISTS )?vector\b/.test(line))
        .join('\n');
    } finally {
      await pglite.close();
    }
  } finally {
    release();
  }
}

/**
 * The embedded database: PGlite (Postgres in WebAssembly, in this process) with the pgvector
 * extension, persisted in `dir`, or in memory when `dir` is null.
 */
export async function openPglite(dir: string | null): Promise<DatabaseHandle> {
  const release = dir ? claimDirectory(dir) : () => undefined;
  try {
    const pglite = await createPglite(dir);
    const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
    const notifications = pgliteNotifications(pglite);
    return {
      db,
      kind: 'pglite',
      poolStats: () => null,
      notifications,
      close: async () => {
        await notifications.close();
        await db.destroy();
        if (!pglite.closed) await pglite.close();
        release();
      },
    };
  } catch (error) {
    release();
    throw error;
  }
}

export async function isReachable(db: Database): Promise<boolean> {
  try {
    await sql`select 1`.execute(db);
    return true;
  } catch {
    return false;
  }
}

/** Postgres error codes the services translate into API answers. */
export const PgError = {
  uniqueViolation: '23505',
  foreignKeyViolation: '23503',
} as const;

/** Error codes of a lost or refused database connection (the driver's and the server's). */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

/** Whether an error means the database could not be reached, rather than that a query failed. */
export function isConnectionFailure(error: unknown): boolean {
  const code = pgErrorCode(error);
  if (code !== undefined && CONNECTION_CODES.has(code)) return true;
  const message = (error as Error | null)?.message ?? '';
  return /Connection terminated|timeout exceeded when trying to connect|connection error|Client was closed/i.test(message);
}

export function pgErrorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
