import type { Database } from '../../platform/db';

export function rolesOf(db: Database, userId: string) {
  return db.selectFrom('administrative_principals').select('role').where('user_id', '=', userId).execute();
}

export function listPrincipals(db: Database) {
  return db.selectFrom('administrative_principals').selectAll().orderBy('created_at').orderBy('user_id').orderBy('role').execute();
}

export function findPrincipals(db: Database, userId: string, role?: string) {
  let query = db.selectFrom('administrative_principals').selectAll().where('user_id', '=', userId);
  if (role !== undefined) query = query.where('role', '=', role);
  return query.execute();
}

/** Inserts the grant; when the user already holds the role, inserts nothing and returns undefined. */
export function insertPrincipal(db: Database, row: { userId: string; role: string; reason: string; grantedBy: string }) {
  return db
    .insertInto('administrative_principals')
    .values({ user_id: row.userId, role: row.role, reason: row.reason, granted_by: row.grantedBy, created_at: new Date() })
    .onConflict((oc) => oc.columns(['user_id', 'role']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function deletePrincipals(db: Database, userId: string, roles: string[]): Promise<void> {
  await db.deleteFrom('administrative_principals').where('user_id', '=', userId).where('role', 'in', roles).execute();
}

export async function countAdmins(db: Database): Promise<number> {
  const row = await db
    .selectFrom('administrative_principals')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('role', '=', 'admin')
    .executeTakeFirstOrThrow();
  return Number(row.count);
}
