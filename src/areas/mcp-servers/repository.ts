import type { Insertable, Selectable } from 'kysely';
import type { McpServers } from '../../../generated/db';
import type { Database } from '../../platform/db';
import type { ListedRecord } from '../../platform/db/list-query';
import { ownedList, ownedRecords } from '../../platform/db/owned';

export type ServerRow = Selectable<McpServers>;

export const { find: findServer, update: updateServer, remove: deleteServer } = ownedRecords('mcp_servers');

export function findServerByPrefix(db: Database, ownerUserId: string, toolPrefix: string) {
  return db
    .selectFrom('mcp_servers')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('tool_prefix', '=', toolPrefix)
    .executeTakeFirst();
}

/** The owner's servers; read a page at a time (their credentials only to say whether they have them). */
export const serverList = ownedList('mcp_servers', {
  fields: [
    'name',
    'tool_prefix',
    'url',
    'transport',
    'authentication',
    'header_name',
    'credentials',
    'integration_id',
    'enabled',
    'timeout_ms',
    'default_tool_policy',
    'tool_policies',
    'tools',
    'status',
    'last_error',
  ],
  times: ['catalog_refreshed_at', 'created_at', 'updated_at'],
});
export type ServerView = ListedRecord<'mcp_servers', typeof serverList>;

/** The owner's enabled servers, oldest first (the order their tools are offered in). */
export function enabledServers(db: Database, ownerUserId: string) {
  return db
    .selectFrom('mcp_servers')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('enabled', '=', true)
    .orderBy('id', 'asc')
    .execute();
}

/** The owner's servers that sign in with their own authorization server (`oauth` without an integration), oldest first. */
export function ownAuthorizationServers(db: Database, ownerUserId: string) {
  return db
    .selectFrom('mcp_servers')
    .selectAll()
    .where('owner_user_id', '=', ownerUserId)
    .where('authentication', '=', 'oauth')
    .where('integration_id', 'is', null)
    .orderBy('id', 'asc')
    .execute();
}

export async function countServers(db: Database, ownerUserId: string): Promise<number> {
  const row = await db
    .selectFrom('mcp_servers')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('owner_user_id', '=', ownerUserId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** The tool prefixes the owner's servers use. */
export async function prefixes(db: Database, ownerUserId: string): Promise<Set<string>> {
  const rows = await db.selectFrom('mcp_servers').select('tool_prefix').where('owner_user_id', '=', ownerUserId).execute();
  return new Set(rows.map((row) => row.tool_prefix));
}

export function insertServer(db: Database, row: Insertable<McpServers>) {
  return db.insertInto('mcp_servers').values(row).returningAll().executeTakeFirstOrThrow();
}
