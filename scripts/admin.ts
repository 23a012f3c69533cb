/**
 * `make admin USER=<id> [ROLE=admin] [REASON=…]`: grants an administrative role from the command
 * line (the first admin of a deployment), audited as `system:script`. With the embedded database,
 * stop the service first (the database allows one process).
 */
import { AuditService } from '../src/areas/audit/service';
import { PrincipalService, type Role } from '../src/areas/principals/service';
import { openDatabase } from '../src/composition';
import { loadConfig } from '../src/config';
import { migrateToLatest } from '../src/platform/db/migrate';

const ROLES: Role[] = ['admin', 'auditor', 'billing_admin', 'support'];

async function main(): Promise<void> {
  const [userId = '', role = 'admin', reason = 'granted with make admin'] = process.argv.slice(2).map((a) => a.trim());
  if (!userId || userId.length > 200 || !(ROLES as string[]).includes(role)) {
    console.error(`usage: make admin USER=<user id> [ROLE=${ROLES.join('|')}] [REASON=<text>]`);
    process.exit(2);
  }
  const database = await openDatabase(loadConfig());
  try {
    await migrateToLatest(database.db);
    const principals = new PrincipalService(database.db, new AuditService(database.db));
    const granted = await principals.ensureRole(
      { userId: 'system:script', requestId: null },
      [userId],
      role as Role,
      reason || 'granted with make admin',
    );
    console.log(granted.length > 0 ? `granted ${role} to ${userId}` : `${userId} already holds ${role}`);
  } finally {
    await database.close();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
