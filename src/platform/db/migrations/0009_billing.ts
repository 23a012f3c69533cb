import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

export async function up(db: Kysely<any>): Promise<void> {
  // Charges may take a balance below zero (the action that crosses it completes); the ledger stays exact.
  await sql`alter table budgets drop constraint if exists budgets_balance_cents_check`.execute(db);
  await db.schema
    .alterTable('budgets')
    // The spending period the counters below belong to (a new period starts them again).
    .addColumn('period_start', 'timestamptz')
    .addColumn('period_spent_micro_cents', 'bigint', (c) => c.notNull().defaultTo(0))
    // Charges to the balance smaller than a cent, carried until they make a whole cent.
    .addColumn('carry_micro_cents', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('ledger_entries').addColumn('reference', 'text').execute();
  await sql`create unique index ledger_entries_reference_idx on ledger_entries (reference) where reference is not null`.execute(db);

  // Every verified provider event, stored once: a redelivery finds its id and changes nothing.
  await db.schema
    .createTable('billing_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('provider_created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('received_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('billing_customers')
    .addColumn('customer_id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('billing_customers_user_idx').on('billing_customers').column('user_id').execute();

  await db.schema
    .createTable('billing_subscriptions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('customer_id', 'text', (c) => c.notNull())
    // Known from the subscription's metadata, or later through billing_customers.
    .addColumn('user_id', 'text')
    .addColumn('plan', 'text')
    .addColumn('price_id', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('current_period_start', 'timestamptz')
    .addColumn('current_period_end', 'timestamptz')
    .addColumn('cancel_at_period_end', 'boolean', (c) => c.notNull().defaultTo(false))
    // The provider time of the newest event applied: an older one never overwrites it.
    .addColumn('event_created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('latest_invoice_status', 'text')
    .addColumn('latest_invoice_amount_cents', 'bigint')
    .addColumn('invoice_event_created_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('billing_subscriptions_user_idx').on('billing_subscriptions').column('user_id').execute();
  await db.schema.createIndex('billing_subscriptions_customer_idx').on('billing_subscriptions').column('customer_id').execute();

  // A user's own billing preferences.
  await db.schema
    .createTable('billing_settings')
    .addColumn('user_id', 'text', (c) => c.primaryKey())
    .addColumn('monthly_spending_limit_cents', 'bigint', (c) => c.check(sql`monthly_spending_limit_cents >= 0`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('billing_settings').ifExists().execute();
  await db.schema.dropTable('billing_subscriptions').ifExists().execute();
  await db.schema.dropTable('billing_customers').ifExists().execute();
  await db.schema.dropTable('billing_events').ifExists().execute();
  await sql`drop index if exists ledger_entries_reference_idx`.execute(db);
  await db.schema.alterTable('ledger_entries').dropColumn('reference').execute();
  await db.schema
    .alterTable('budgets')
    .dropColumn('carry_micro_cents')
    .dropColumn('period_spent_micro_cents')
    .dropColumn('period_start')
    .execute();
}
