import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * The service as an OAuth 2.1 authorization server for MCP clients: registered clients (dynamic
 * registration), authorization requests awaiting the user's consent and their one-time codes,
 * refresh tokens (rotated on use), and access tokens issued to a client for one resource (one per
 * connection, its secret replaced by each refresh).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('oauth_clients')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('metadata', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('oauth_authorizations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('client_id', 'text', (c) => c.notNull().references('oauth_clients.id').onDelete('cascade'))
    .addColumn('params', 'jsonb', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('pending', 'approved', 'denied', 'exchanged')`))
    .addColumn('user_id', 'text')
    .addColumn('code_hash', 'text', (c) => c.unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('oauth_authorizations_client_idx').on('oauth_authorizations').column('client_id').execute();
  await db.schema
    .createTable('oauth_refresh_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('client_id', 'text', (c) => c.notNull().references('oauth_clients.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    // The connection's access token, renewed by each refresh; once revoked, refreshing stops.
    .addColumn('access_token_id', 'text', (c) => c.notNull())
    .addColumn('scopes', sql`text[]`, (c) => c.notNull())
    .addColumn('resource', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('oauth_refresh_tokens_client_idx').on('oauth_refresh_tokens').column('client_id').execute();
  await db.schema
    .alterTable('access_tokens')
    .addColumn('client_id', 'text', (c) => c.references('oauth_clients.id').onDelete('cascade'))
    .addColumn('resource', 'text')
    .execute();
  await db.schema.createIndex('access_tokens_client_idx').on('access_tokens').column('client_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('access_tokens_client_idx').ifExists().execute();
  await db.schema.alterTable('access_tokens').dropColumn('resource').dropColumn('client_id').execute();
  await db.schema.dropTable('oauth_refresh_tokens').ifExists().execute();
  await db.schema.dropTable('oauth_authorizations').ifExists().execute();
  await db.schema.dropTable('oauth_clients').ifExists().execute();
}
