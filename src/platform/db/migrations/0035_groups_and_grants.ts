import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/** The tables whose rows can be granted, and the resource kind a grant names them by. */
const GRANTABLE = [
  ['files', 'file'],
  ['projects', 'project'],
  ['skills', 'skill'],
] as const;

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('groups')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    // 'manual': made by an admin; 'identity_provider': made for a name the groups claim carried.
    .addColumn('source', 'text', (c) =>
      c
        .notNull()
        .defaultTo('manual')
        .check(sql`source in ('manual', 'identity_provider')`),
    )
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`create unique index groups_name_key on groups (lower(name))`.execute(db);

  await db.schema
    .createTable('group_members')
    // A membership's own id (newest last): the order members are listed in.
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('group_id', 'text', (c) => c.notNull().references('groups.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    // 'manual': added by an admin; 'identity_provider': carried by the user's token, kept in step with it.
    .addColumn('source', 'text', (c) =>
      c
        .notNull()
        .defaultTo('manual')
        .check(sql`source in ('manual', 'identity_provider')`),
    )
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('group_members_pk', ['group_id', 'user_id'])
    .execute();
  await db.schema.createIndex('group_members_user_idx').on('group_members').columns(['user_id', 'group_id']).execute();

  // One table for every kind of shared resource: a resource kind and id (no foreign key, so the
  // triggers below forget the grants of a deleted resource or group), a principal and a permission.
  await db.schema
    .createTable('access_grants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('resource_kind', 'text', (c) =>
      c.notNull().check(sql`resource_kind in ('file', 'project', 'skill', 'knowledge_source', 'model', 'connection')`),
    )
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('principal_kind', 'text', (c) => c.notNull().check(sql`principal_kind in ('user', 'group')`))
    .addColumn('principal_id', 'text', (c) => c.notNull())
    .addColumn('permission', 'text', (c) => c.notNull().check(sql`permission in ('read', 'use', 'edit')`))
    .addColumn('granted_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('access_grants_resource_principal_key', ['resource_kind', 'resource_id', 'principal_kind', 'principal_id'])
    .execute();
  // "What is granted to me (or my groups)": the read rule's lookup.
  await db.schema
    .createIndex('access_grants_principal_idx')
    .on('access_grants')
    .columns(['principal_kind', 'principal_id', 'resource_kind', 'resource_id'])
    .execute();

  await sql`
    create function access_grants_forget_resource() returns trigger language plpgsql as $$
    begin
      delete from access_grants where resource_kind = tg_argv[0] and resource_id = old.id;
      return old;
    end $$`.execute(db);
  for (const [table, kind] of GRANTABLE) {
    await sql`create trigger ${sql.id(`${table}_forget_grants`)} after delete on ${sql.table(table)}
              for each row execute function access_grants_forget_resource(${sql.lit(kind)})`.execute(db);
  }
  await sql`
    create function access_grants_forget_group() returns trigger language plpgsql as $$
    begin
      delete from access_grants where principal_kind = 'group' and principal_id = old.id;
      return old;
    end $$`.execute(db);
  await sql`create trigger groups_forget_grants after delete on groups
            for each row execute function access_grants_forget_group()`.execute(db);

  // 1.0.0's file shares become read grants to users, granted by the file's owner.
  await sql`
    insert into access_grants (id, resource_kind, resource_id, principal_kind, principal_id, permission, granted_by, created_at, updated_at)
    select gen_random_uuid()::text, 'file', s.file_id, 'user', s.grantee_user_id, 'read', f.owner_user_id, s.created_at, s.created_at
    from file_shares s join files f on f.id = s.file_id`.execute(db);
  await db.schema.dropTable('file_shares').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('file_shares')
    .addColumn('file_id', 'text', (c) => c.notNull().references('files.id').onDelete('cascade'))
    .addColumn('grantee_user_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('file_shares_pk', ['file_id', 'grantee_user_id'])
    .execute();
  await db.schema.createIndex('file_shares_grantee_idx').on('file_shares').columns(['grantee_user_id', 'file_id']).execute();
  await sql`
    insert into file_shares (file_id, grantee_user_id, created_at)
    select resource_id, principal_id, created_at from access_grants
    where resource_kind = 'file' and principal_kind = 'user'`.execute(db);
  await sql`drop trigger groups_forget_grants on groups`.execute(db);
  for (const [table] of GRANTABLE) await sql`drop trigger ${sql.id(`${table}_forget_grants`)} on ${sql.table(table)}`.execute(db);
  await sql`drop function access_grants_forget_group()`.execute(db);
  await sql`drop function access_grants_forget_resource()`.execute(db);
  await db.schema.dropTable('access_grants').execute();
  await db.schema.dropTable('group_members').execute();
  await db.schema.dropTable('groups').execute();
}
