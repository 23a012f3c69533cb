import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Integrations: users' OAuth connections (the tokens sealed), the authorizations under way (a
 * single-use state with its PKCE verifier), and MCP servers that authenticate with a connection
 * (`authentication` `oauth`, and the integration whose connection they use).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('integration_connections')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    // An operator-configured provider's id, or `mcp:<server id>` for an MCP server's own authorization server.
    .addColumn('integration_id', 'text', (c) => c.notNull())
    .addColumn('server_id', 'text', (c) => c.references('mcp_servers.id').onDelete('cascade'))
    // `expired`: a refresh was refused (or there is nothing to refresh with); the user connects again.
    .addColumn('status', 'text', (c) =>
      c
        .notNull()
        .defaultTo('active')
        .check(sql`status in ('active', 'expired')`),
    )
    // Sealed with the deployment's secrets key.
    .addColumn('access_token', 'text', (c) => c.notNull())
    .addColumn('refresh_token', 'text')
    .addColumn('token_type', 'text', (c) => c.notNull())
    // The scopes granted, space-separated as OAuth writes them.
    .addColumn('scope', 'text')
    // Who the user is at the provider (an ID token's email, name or subject), when it says.
    .addColumn('account', 'text')
    .addColumn('expires_at', 'timestamptz')
    // MCP servers: the client registered with their authorization server (sealed JSON) and what discovery found (JSON).
    .addColumn('oauth_client', 'text')
    .addColumn('oauth_server', 'jsonb')
    // Bumped by every change of the tokens: a refresh stores its tokens only over the ones it refreshed.
    .addColumn('version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('refreshed_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createIndex('integration_connections_owner_integration_idx')
    .on('integration_connections')
    .columns(['owner_user_id', 'integration_id'])
    .unique()
    .execute();
  await db.schema.createIndex('integration_connections_server_idx').on('integration_connections').column('server_id').execute();

  await db.schema
    .createTable('integration_authorizations')
    // The SHA-256 of the state the authorization URL carries (the state itself is not stored).
    .addColumn('state_hash', 'text', (c) => c.primaryKey())
    .addColumn('owner_user_id', 'text', (c) => c.notNull())
    .addColumn('integration_id', 'text', (c) => c.notNull())
    .addColumn('server_id', 'text', (c) => c.references('mcp_servers.id').onDelete('cascade'))
    // The PKCE code verifier, sealed.
    .addColumn('code_verifier', 'text', (c) => c.notNull())
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('oauth_client', 'text')
    .addColumn('oauth_server', 'jsonb')
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createIndex('integration_authorizations_owner_idx')
    .on('integration_authorizations')
    .columns(['owner_user_id', 'integration_id', 'created_at'])
    .execute();
  await db.schema.createIndex('integration_authorizations_expiry_idx').on('integration_authorizations').column('expires_at').execute();

  await sql`alter table mcp_servers drop constraint mcp_servers_authentication_check`.execute(db);
  await sql`alter table mcp_servers add constraint mcp_servers_authentication_check check (authentication in ('none', 'bearer', 'header', 'oauth'))`.execute(
    db,
  );
  // With `oauth`: the operator-configured integration whose connection it uses; null, its own authorization server.
  await sql`alter table mcp_servers add column integration_id text`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table mcp_servers drop column integration_id`.execute(db);
  await sql`delete from mcp_servers where authentication = 'oauth'`.execute(db);
  await sql`alter table mcp_servers drop constraint mcp_servers_authentication_check`.execute(db);
  await sql`alter table mcp_servers add constraint mcp_servers_authentication_check check (authentication in ('none', 'bearer', 'header'))`.execute(
    db,
  );
  await db.schema.dropTable('integration_authorizations').ifExists().execute();
  await db.schema.dropTable('integration_connections').ifExists().execute();
}
