/** `make migrate`: brings the configured database (DATABASE_URL, or the embedded one) up to date. */
import { openDatabase } from '../src/composition';
import { loadConfig } from '../src/config';
import { migrateToLatest } from '../src/platform/db/migrate';

async function main(): Promise<void> {
  const database = await openDatabase(loadConfig());
  try {
    const applied = await migrateToLatest(database.db);
    console.log(applied.length > 0 ? `applied: ${applied.join(', ')}` : 'the schema is up to date');
  } finally {
    await database.close();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
