/**
 * `make pglite-dump [VECTORS=false]`: writes the embedded database (DATA_DIR/pglite) to standard
 * output as SQL for `psql` against an empty Postgres database (docs/operations.md). The service
 * must be stopped. VECTORS=false leaves out pgvector and the embeddings, for a server without it.
 */
import path from 'node:path';
import { loadConfig } from '../src/config';
import { dumpPglite } from '../src/platform/db';

async function main(): Promise<void> {
  const config = loadConfig();
  const vectors = (process.env.VECTORS ?? 'true').toLowerCase() !== 'false';
  process.stdout.write(await dumpPglite(path.join(config.dataDir, 'pglite'), { vectors }));
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
