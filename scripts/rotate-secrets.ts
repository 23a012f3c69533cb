/**
 * `make rotate-secrets`: re-seals every stored secret that is not sealed with the first key of
 * SECRETS_KEY (older keys, the deprecated WEBHOOK_SECRETS_KEY, the `v1:` webhook secrets of
 * earlier versions), so the older keys can then be removed. Safe to run again and, on Postgres,
 * while the service runs; with the embedded database, stop the service first (one process).
 * Exits 1 when some secret could not be opened (those are listed and left as they were).
 */
import { openDatabase, openSecrets, SEALED_COLUMNS } from '../src/composition';
import { hasIdentityProvider, loadConfig } from '../src/config';
import { migrateToLatest } from '../src/platform/db/migrate';
import { resealAll } from '../src/platform/secrets';
import { loadDevAuthMaterial } from '../src/platform/tokens';

async function main(): Promise<void> {
  const config = loadConfig();
  const database = await openDatabase(config);
  try {
    await migrateToLatest(database.db);
    const cookieSecret =
      config.auth.cookieSecret ?? (hasIdentityProvider(config) ? null : (await loadDevAuthMaterial(config.dataDir)).cookieSecret);
    const secrets = openSecrets(config, cookieSecret);
    const report = await resealAll(database.db, secrets, SEALED_COLUMNS);
    console.log(`re-sealed ${report.resealed} stored secret(s) with key ${secrets.currentKeyId}`);
    for (const { table, column, id, reason } of report.unreadable) console.error(`cannot open ${table}.${column} of ${id}: ${reason}`);
    if (report.unreadable.length > 0) process.exitCode = 1;
  } finally {
    await database.close();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
