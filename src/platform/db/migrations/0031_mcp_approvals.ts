import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * Approvals of tool calls made through the service's MCP server (`/mcp`): such an approval has no
 * conversation, reply or model call id, records its `origin`, and keeps the outcome of the call
 * once it ran (`outcome`) and when the MCP client was given it (`outcome_delivered_at`). Every
 * approval of chat keeps its conversation, reply and call id.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tool_approvals')
    .addColumn('origin', 'text', (c) =>
      c
        .notNull()
        .defaultTo('chat')
        .check(sql`origin in ('chat', 'mcp')`),
    )
    .addColumn('outcome', 'jsonb')
    .addColumn('outcome_delivered_at', 'timestamptz')
    .execute();
  await sql`alter table tool_approvals alter column conversation_id drop not null`.execute(db);
  await sql`alter table tool_approvals alter column message_id drop not null`.execute(db);
  await sql`alter table tool_approvals alter column tool_call_id drop not null`.execute(db);
  await sql`alter table tool_approvals add constraint tool_approvals_chat_bound_check
    check (origin <> 'chat' or (conversation_id is not null and message_id is not null and tool_call_id is not null))`.execute(db);
  // An MCP call is found again by its user, tool and arguments (the client calls again for the outcome).
  await sql`create index tool_approvals_mcp_call_idx on tool_approvals (user_id, tool_name, arguments_digest, id) where origin = 'mcp'`.execute(
    db,
  );
  // At most one undecided approval per user, tool and arguments: two identical calls at once ask once.
  await sql`create unique index tool_approvals_mcp_one_pending_idx on tool_approvals (user_id, tool_name, arguments_digest)
    where origin = 'mcp' and status = 'pending'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists tool_approvals_mcp_one_pending_idx`.execute(db);
  await sql`drop index if exists tool_approvals_mcp_call_idx`.execute(db);
  await sql`delete from tool_approvals where origin = 'mcp'`.execute(db);
  await sql`alter table tool_approvals drop constraint if exists tool_approvals_chat_bound_check`.execute(db);
  await sql`alter table tool_approvals alter column tool_call_id set not null`.execute(db);
  await sql`alter table tool_approvals alter column message_id set not null`.execute(db);
  await sql`alter table tool_approvals alter column conversation_id set not null`.execute(db);
  await db.schema.alterTable('tool_approvals').dropColumn('outcome_delivered_at').dropColumn('outcome').dropColumn('origin').execute();
}
