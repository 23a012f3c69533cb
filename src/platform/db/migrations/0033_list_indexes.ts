import { type Kysely, sql } from 'kysely';

// Frozen: this migration never imports application code and is never edited once released.

/**
 * An index for every filter of every list, so that a page costs the same at a million rows as at
 * a hundred: each holds the filter's column and the owner (the equalities of the page's query)
 * and then `id` (its keyset order), so that a page is one range of the index read newest first and
 * stopped after `limit + 1` rows, under a custom or a generic plan. Without them a page read the
 * owner's rows newest first and filtered them (a user with a million notes and ten pinned ones
 * read all million) or sorted every row of the filter's value.
 *
 * Where a column had an index of its own (kept for its foreign key's `on delete`), the new index
 * begins with that column and replaces it.
 */
const INDEXES: ReadonlyArray<{ name: string; table: string; columns: string[]; replaces?: { name: string; columns: string[] } }> = [
  {
    name: 'notes_project_owner_id_idx',
    table: 'notes',
    columns: ['project_id', 'owner_user_id', 'id'],
    replaces: { name: 'notes_project_idx', columns: ['project_id'] },
  },
  { name: 'notes_owner_pinned_id_idx', table: 'notes', columns: ['owner_user_id', 'pinned', 'id'] },
  {
    name: 'memory_items_project_owner_id_idx',
    table: 'memory_items',
    columns: ['project_id', 'owner_user_id', 'id'],
    replaces: { name: 'memory_items_project_idx', columns: ['project_id'] },
  },
  { name: 'memory_items_owner_kind_id_idx', table: 'memory_items', columns: ['owner_user_id', 'kind', 'id'] },
  {
    name: 'projects_parent_owner_id_idx',
    table: 'projects',
    columns: ['parent_id', 'owner_user_id', 'id'],
    replaces: { name: 'projects_parent_idx', columns: ['parent_id'] },
  },
  {
    name: 'skills_project_owner_id_idx',
    table: 'skills',
    columns: ['project_id', 'owner_user_id', 'id'],
    replaces: { name: 'skills_project_idx', columns: ['project_id'] },
  },
  { name: 'skills_owner_enabled_id_idx', table: 'skills', columns: ['owner_user_id', 'enabled', 'id'] },
  {
    name: 'files_project_owner_id_idx',
    table: 'files',
    columns: ['project_id', 'owner_user_id', 'id'],
    replaces: { name: 'files_project_idx', columns: ['project_id'] },
  },
  {
    name: 'files_parent_owner_id_idx',
    table: 'files',
    columns: ['parent_id', 'owner_user_id', 'id'],
    replaces: { name: 'files_parent_idx', columns: ['parent_id'] },
  },
  { name: 'files_owner_kind_id_idx', table: 'files', columns: ['owner_user_id', 'kind', 'id'] },
  { name: 'files_owner_status_id_idx', table: 'files', columns: ['owner_user_id', 'status', 'id'] },
  { name: 'files_conversation_owner_id_idx', table: 'files', columns: ['conversation_id', 'owner_user_id', 'id'] },
  { name: 'outputs_owner_type_id_idx', table: 'outputs', columns: ['owner_user_id', 'type', 'id'] },
  { name: 'outputs_owner_origin_id_idx', table: 'outputs', columns: ['owner_user_id', 'origin', 'id'] },
  { name: 'outputs_conversation_owner_id_idx', table: 'outputs', columns: ['conversation_id', 'owner_user_id', 'id'] },
  { name: 'outputs_automation_owner_id_idx', table: 'outputs', columns: ['automation_id', 'owner_user_id', 'id'] },
  { name: 'outputs_project_owner_id_idx', table: 'outputs', columns: ['project_id', 'owner_user_id', 'id'] },
  { name: 'outputs_generation_owner_id_idx', table: 'outputs', columns: ['generation_id', 'owner_user_id', 'id'] },
  {
    name: 'conversations_project_owner_id_idx',
    table: 'conversations',
    columns: ['project_id', 'owner_user_id', 'id'],
    replaces: { name: 'conversations_project_idx', columns: ['project_id'] },
  },
  { name: 'conversations_owner_archived_id_idx', table: 'conversations', columns: ['owner_user_id', 'archived', 'id'] },
  { name: 'automations_owner_enabled_id_idx', table: 'automations', columns: ['owner_user_id', 'enabled', 'id'] },
  {
    name: 'automation_runs_automation_owner_id_idx',
    table: 'automation_runs',
    columns: ['automation_id', 'owner_user_id', 'id'],
    replaces: { name: 'automation_runs_automation_id_idx', columns: ['automation_id', 'id'] },
  },
  { name: 'automation_runs_owner_status_id_idx', table: 'automation_runs', columns: ['owner_user_id', 'status', 'id'] },
  {
    name: 'webhook_deliveries_subscription_owner_id_idx',
    table: 'webhook_deliveries',
    columns: ['subscription_id', 'owner_user_id', 'id'],
    replaces: { name: 'webhook_deliveries_subscription_id_idx', columns: ['subscription_id', 'id'] },
  },
  { name: 'webhook_deliveries_owner_status_id_idx', table: 'webhook_deliveries', columns: ['owner_user_id', 'status', 'id'] },
  { name: 'agent_commands_environment_status_id_idx', table: 'agent_commands', columns: ['environment_id', 'status', 'id'] },
  {
    name: 'message_feedback_conversation_user_id_idx',
    table: 'message_feedback',
    columns: ['conversation_id', 'user_id', 'id'],
    replaces: { name: 'message_feedback_conversation_idx', columns: ['conversation_id'] },
  },
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const index of INDEXES) {
    await db.schema.createIndex(index.name).on(index.table).columns(index.columns).execute();
    if (index.replaces) await db.schema.dropIndex(index.replaces.name).execute();
  }
  // A user's pending approvals (chat and MCP), the few among their decided ones; the lists name
  // `pending` in their statements, so that a prepared plan can use it too.
  await sql`create index tool_approvals_pending_user_id_idx on tool_approvals (user_id, id) where status = 'pending'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('tool_approvals_pending_user_id_idx').execute();
  for (const index of [...INDEXES].reverse()) {
    if (index.replaces) await db.schema.createIndex(index.replaces.name).on(index.table).columns(index.replaces.columns).execute();
    await db.schema.dropIndex(index.name).execute();
  }
}
