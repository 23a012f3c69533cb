import fs from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { PGliteDialect } from 'kysely-pglite-dialect';
import type { DB } from '../../../generated/db';

export type Database = Kysely<DB>;
export type { DB };

export interface DatabaseHandle {
  db: Database;
  kind: 'postgres' | 'pglite';
  /** The connection pool's state (Postgres), or null (PGlite has no pool). */
  poolStats(): { total: number; idle: number; waiting: number } | null;
  close(): Promise<void>;
}

// int8 (counts, sums) as numbers, as PGlite returns them; values stay far below 2^53 here.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export async function openPostgres(url: string, poolSize: number): Promise<DatabaseHandle> {
  const pool = new pg.Pool({ connectionString: url, max: poolSize, connectionTimeoutMillis: 5000 });
  pool.on('error', () => undefined); // an idle client lost its server; the pool replaces it
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    kind: 'postgres',
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: () => db.destroy(),
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
 * The embedded database: PGlite (Postgres in WebAssembly, in this process) with the pgvector
 * extension, persisted in `dir`, or in memory when `dir` is null.
 */
export async function openPglite(dir: string | null): Promise<DatabaseHandle> {
  const release = dir ? claimDirectory(dir) : () => undefined;
  try {
    // The CommonJS builds (which the dialect's types name), loaded only here: a service on
    // Postgres never carries the embedded database's code.
    const { PGlite } = require('@electric-sql/pglite') as typeof import('@electric-sql/pglite');
    const { vector } = require('@electric-sql/pglite-pgvector') as typeof import('@electric-sql/pglite-pgvector');
    const pglite = await PGlite.create(dir ?? undefined, { extensions: { vector } });
    const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
    return {
      db,
      kind: 'pglite',
      poolStats: () => null,
      close: async () => {
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
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', '57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);

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
