import { sql } from 'kysely';
import type { Database } from './index';

/** Whether the connected database has pgvector installed (the embedded PGlite does; a plain Postgres may not). */
export async function hasVectorExtension(db: Database): Promise<boolean> {
  const result = await sql<{ installed: boolean }>`
    select exists (select 1 from pg_extension where extname = 'vector') as installed`.execute(db);
  return result.rows[0]?.installed === true;
}
