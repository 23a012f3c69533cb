import fs from 'node:fs';
import pg from 'pg';

export default async function globalTeardown(): Promise<void> {
  const url = process.env.DATABASE_URL;
  const name = process.env.TEST_DATABASE_NAME;
  if (url && name) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    // The run's template and every test file's copy of it.
    const copies = await admin.query<{ datname: string }>(`select datname from pg_database where datname like $1`, [`${name}\\_%`]);
    for (const { datname } of copies.rows) await admin.query(`drop database if exists ${datname} with (force)`);
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
  if (process.env.TEST_ROOT) fs.rmSync(process.env.TEST_ROOT, { recursive: true, force: true });
}
