import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';
import { connectionFailure } from '../net/failures';
import * as m0001 from './migrations/0001_initial';
import * as m0002 from './migrations/0002_idempotency_keys';
import * as m0003 from './migrations/0003_administration';
import * as m0004 from './migrations/0004_files';
import * as m0005 from './migrations/0005_knowledge';
import * as m0006 from './migrations/0006_webhooks';
import * as m0007 from './migrations/0007_conversations';
import * as m0008 from './migrations/0008_automations';
import * as m0009 from './migrations/0009_billing';
import * as m0010 from './migrations/0010_agent_environments';
import * as m0011 from './migrations/0011_rate_limits';
import * as m0012 from './migrations/0012_rate_limit_grants';
import * as m0013 from './migrations/0013_reply_leases';
import * as m0014 from './migrations/0014_embedding_models';
import * as m0015 from './migrations/0015_model_connections';
import * as m0016 from './migrations/0016_settings_onboarding';
import * as m0017 from './migrations/0017_embeddings_model_setting';
import * as m0018 from './migrations/0018_tools_approvals';
import * as m0019 from './migrations/0019_mcp_servers';
import * as m0020 from './migrations/0020_message_citations';
import * as m0021 from './migrations/0021_media';
import * as m0022 from './migrations/0022_integrations';
import * as m0023 from './migrations/0023_integration_refresh_lease';
import * as m0024 from './migrations/0024_rate_limiter_flexible';
import * as m0025 from './migrations/0025_usage_resource_index';
import * as m0026 from './migrations/0026_message_tree';
import * as m0027 from './migrations/0027_reply_stop_events';
import * as m0028 from './migrations/0028_message_attachments';
import * as m0029 from './migrations/0029_feedback_temporary';
import * as m0030 from './migrations/0030_access_tokens';
import * as m0031 from './migrations/0031_mcp_approvals';
import * as m0032 from './migrations/0032_oauth';
import * as m0033 from './migrations/0033_list_indexes';
import * as m0034 from './migrations/0034_text_search_statistics';
import * as m0035 from './migrations/0035_groups_and_grants';
import * as m0037 from './migrations/0037_skill_assistants';
import * as m0038 from './migrations/0038_quotas';
import * as m0039 from './migrations/0039_group_model_policies';

/** Every migration, in order. A new migration is a new frozen file added here. */
export const MIGRATIONS: Record<string, Migration> = {
  '0001_initial': m0001,
  '0002_idempotency_keys': m0002,
  '0003_administration': m0003,
  '0004_files': m0004,
  '0005_knowledge': m0005,
  '0006_webhooks': m0006,
  '0007_conversations': m0007,
  '0008_automations': m0008,
  '0009_billing': m0009,
  '0010_agent_environments': m0010,
  '0011_rate_limits': m0011,
  '0012_rate_limit_grants': m0012,
  '0013_reply_leases': m0013,
  '0014_embedding_models': m0014,
  '0015_model_connections': m0015,
  '0016_settings_onboarding': m0016,
  '0017_embeddings_model_setting': m0017,
  '0018_tools_approvals': m0018,
  '0019_mcp_servers': m0019,
  '0020_message_citations': m0020,
  '0021_media': m0021,
  '0022_integrations': m0022,
  '0023_integration_refresh_lease': m0023,
  '0024_rate_limiter_flexible': m0024,
  '0025_usage_resource_index': m0025,
  '0026_message_tree': m0026,
  '0027_reply_stop_events': m0027,
  '0028_message_attachments': m0028,
  '0029_feedback_temporary': m0029,
  '0030_access_tokens': m0030,
  '0031_mcp_approvals': m0031,
  '0032_oauth': m0032,
  '0033_list_indexes': m0033,
  '0034_text_search_statistics': m0034,
  '0035_groups_and_grants': m0035,
  '0037_skill_assistants': m0037,
  '0038_quotas': m0038,
  '0039_group_model_policies': m0039,
};

class StaticMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return MIGRATIONS;
  }
}

/**
 * Whether the database has applied exactly the migrations above (no fewer, no others), read in one
 * query. The migrator's own checks (the catalog for its tables, its lock) took a third of a second
 * on a restarted embedded database, whose catalog is cold; a database in any other state goes
 * through the migrator, which applies what is missing or refuses what it does not know.
 */
async function isUpToDate(db: Kysely<any>): Promise<boolean> {
  const names = Object.keys(MIGRATIONS);
  try {
    const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
    return rows.length === names.length && rows.every((row, i) => row.name === names[i]);
  } catch {
    return false; // no migration table yet (or no database: the migrator says which)
  }
}

/** Brings the schema up to date; throws (with the failing migration's name) when one fails. */
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  if (await isUpToDate(db)) return [];
  const migrator = new Migrator({ db, provider: new StaticMigrationProvider() });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (failed) throw new Error(`migration ${failed.migrationName} failed: ${reason}`, { cause: error });
    throw new Error(beforeAnyMigration(error, reason), { cause: error });
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * What stopped the migrator before it ran a migration: most often the database itself (not
 * running, not listening there, refusing the credentials, no such database).
 */
function beforeAnyMigration(error: unknown, reason: string): string {
  const failure = connectionFailure(error);
  if (failure) return `the database could not be reached: ${failure.reason} (${reason}); check DATABASE_URL and that the server runs`;
  // SQLSTATE classes 08 (connection exception), 28 (invalid authorization) and 3D (no such database).
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^(08|28|3D)/.test(code)) return `the database refused the connection: ${reason}; check DATABASE_URL`;
  return `the migrations could not start: ${reason}`;
}
