import fs from 'node:fs';
import path from 'node:path';
import { type CompiledQuery, Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { PGliteDialect } from 'kysely-pglite-dialect';
import type { DB } from '../../../generated/db';
import { parseTimestamptz } from './timestamps';

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
pg.types.setTypeParser(pg.types.builtins.TIMESTAMPTZ, parseTimestamptz);

/** Statement texts run as named statements, with their names (see `clientClass`). */
const preparedNames = new Map<string, string>();
/** A bound on the server memory prepared statements hold: each connection keeps each one it has run. */
const MAX_PREPARED_STATEMENTS = 256;
let preparedCount = 0;

/** Queries worth planning once: data statements (not `begin`, `commit`, DDL or `set`). */
const DATA_STATEMENT = /^\s*(select|insert|update|delete|with)\b/i;
const TRANSACTION_START = /^\s*(begin|start transaction)\b/i;
const TRANSACTION_END = /^\s*(commit|rollback)\b/i;

/** The name `text` runs under as a named statement, given one on its first run (up to the bound). */
function preparedName(text: string): string | undefined {
  let name = preparedNames.get(text);
  if (name === undefined && preparedNames.size < MAX_PREPARED_STATEMENTS && DATA_STATEMENT.test(text)) {
    name = `aiws_${(preparedCount += 1)}`;
    preparedNames.set(text, name);
  }
  return name;
}

/**
 * Postgres refuses to run a prepared `select *` whose table a migration has changed since ("cached
 * plan must not change result type"); the text is then prepared again under a new name.
 */
const isStalePlan = (error: Error | null) => (error as { code?: string } | null)?.code === '0A000' && /cached plan must not change result type/.test(error?.message ?? '');

/**
 * The pool's client: Kysely's queries (text and values, answered by a promise) run through pg's
 * callback form; when `prepared`, data statements outside transactions run as named (server-side
 * prepared) statements, parsed and planned once per connection rather than on every execution,
 * which is most of Postgres's work for the short queries every request makes. Statements inside a
 * transaction run unnamed: after a migration changes a table, a prepared `select *` fails once per
 * connection (and is prepared again), which a transaction could not recover from.
 *
 * The callback form, because of what pg's promise form costs: with it, every query's rows and
 * the request around them outlived two young-generation collections and were promoted to the old
 * generation (1.6-1.8 MB per collection in a loop of pool checkouts and queries on Node 20, against
 * 1.5 KB for the same loop through the callback form, which also ran 16% faster), so that each
 * collection copied them and full collections came every few seconds (docs/performance.md).
 * Kept on every Node for now, unlike the request constructors (src/http/server.ts): on Node 24.21
 * the killed-instance case of test/e2e/chat-recovery-instances.test.ts let a reply's lease lapse
 * while its instance was alive (3 of 3 runs with pg's promise form, 1 of 2 with this one); find out
 * why before gating this on Node 20.
 */
function clientClass(prepared: boolean): typeof pg.Client {
  return class ServiceClient extends pg.Client {
    private inTransaction = false;

    // The driver's overloads; Kysely calls query(text, values).
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override query(config: any, values?: any, callback?: any): any {
      if (typeof config !== 'string' || typeof values === 'function' || callback !== undefined) return super.query(config, values, callback);
      if (TRANSACTION_START.test(config)) this.inTransaction = true;
      else if (TRANSACTION_END.test(config)) this.inTransaction = false;
      const name = prepared && !this.inTransaction ? preparedName(config) : undefined;
      const query = name === undefined ? { text: config, values } : { name, text: config, values };
      return new Promise((resolve, reject) => {
        super.query(query, (error: Error | null, result: pg.QueryResult) => {
          if (!error) return resolve(result);
          if (name === undefined || !isStalePlan(error)) return reject(error);
          if (preparedNames.get(config) === name) preparedNames.set(config, `aiws_${(preparedCount += 1)}`);
          resolve(this.query(config, values));
        });
      });
    }
  };
}

export interface PostgresOptions {
  /**
   * Whether marked statements run as named statements. Off behind a transaction-mode connection
   * pooler that does not track them (one that hands each transaction a different server
   * connection, where the name may be unknown).
   */
  preparedStatements?: boolean;
}

/** Runs a compiled statement's text and parameters on a pool's client and answers its rows. */
type Runner = (text: string, parameters: readonly unknown[]) => Promise<unknown[]>;
/** The runner of each database opened by openPostgres (see `rowsOf`). */
const runners = new WeakMap<Database, Runner>();

/**
 * The rows of a compiled query. On the database openPostgres opened, the query runs on a client of
 * the pool directly (checked out, queried as Kysely queries it, released) rather than through
 * Kysely's executor, whose connection provider, driver and result layers a compiled query does not
 * need. A transaction (a Kysely of its own, on its connection) and PGlite run it through Kysely.
 */
export async function rowsOf<R>(db: Database, query: CompiledQuery<R>): Promise<R[]> {
  const run = runners.get(db);
  if (run) return (await run(query.sql, query.parameters)) as R[];
  return (await db.executeQuery(query)).rows;
}

function poolRunner(pool: pg.Pool): Runner {
  return (text, parameters) =>
    new Promise((resolve, reject) => {
      pool.connect((error, client, release) => {
        if (error || !client) return reject(error ?? new Error('the pool gave no client'));
        // The client's query(text, values) (clientClass), as Kysely calls it; released as Kysely releases it.
        (client.query(text, parameters as unknown[]) as Promise<pg.QueryResult>).then(
          (result) => {
            release();
            resolve(result.rows);
          },
          (failure: unknown) => {
            release();
            reject(failure as Error);
          },
        );
      });
    });
}

export async function openPostgres(url: string, poolSize: number, options: PostgresOptions = {}): Promise<DatabaseHandle> {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: 5000,
    Client: clientClass(options.preparedStatements ?? false),
  });
  pool.on('error', () => undefined); // an idle client lost its server; the pool replaces it
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  runners.set(db, poolRunner(pool));
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
 * The embedded database's buffer cache. Postgres's default 128 MB is resident from start-up (in
 * WebAssembly memory, which is never given back): a third of an idle instance on PGlite (357.8 MiB;
 * 247-272 with 16 MB). Its data files are read through the operating system's page cache either way.
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
