import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Users' MCP servers: where and how to reach them (the credentials sealed), their tool policies,
 * and the tool catalog as the server last listed it.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('mcp_servers')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    // The namespace of its tools' names (`<tool_prefix>__<tool>`), chosen at creation and kept.
    .addColumn('tool_prefix', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('transport', 'text', (c) => c.notNull().check(sql`transport in ('streamable_http', 'sse')`))
    .addColumn('authentication', 'text', (c) => c.notNull().check(sql`authentication in ('none', 'bearer', 'header')`))
    .addColumn('header_name', 'text')
    // The bearer token or header value, sealed with the deployment's secrets key.
    .addColumn('credentials', 'text')
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('timeout_ms', 'integer', (c) => c.notNull())
    .addColumn('default_tool_policy', 'text', (c) => c.notNull().check(sql`default_tool_policy in ('allow', 'approval_required', 'deny')`))
    // { <the server's tool name>: policy }
    .addColumn('tool_policies', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    // [{ name, namespacedName, description, inputSchema }] as the server last listed them.
    .addColumn('tools', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('catalog_refreshed_at', 'timestamptz')
    .addColumn('status', 'text', (c) =>
      c
        .notNull()
        .defaultTo('untested')
        .check(sql`status in ('untested', 'active', 'error')`),
    )
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('mcp_servers_owner_id_idx').on('mcp_servers').columns(['owner_user_id', 'id']).execute();
  await db.schema
    .createIndex('mcp_servers_owner_prefix_idx')
    .on('mcp_servers')
    .columns(['owner_user_id', 'tool_prefix'])
    .unique()
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('mcp_servers').ifExists().execute();
}
