/**
 * The list routes B1 measures: how each table is filled (100,000 rows of the service's own schema,
 * one in a hundred the bench user's) and what the limit (bench/baseline.ts) runs to answer
 * `GET ?limit=20` with the same JSON: one statement per route, its columns named and ordered as the
 * API's fields, timestamps as epoch milliseconds computed by Postgres.
 */
import { sql } from 'kysely';
import type { Database } from '../src/platform/db';

export interface ListRoute {
  /** The collection's name, the service's path under /api/v1 and the baseline's path. */
  name: string;
  /** The page's array property. */
  items: string;
  /** The operation the service answers the route with: the limit writes its body with the same compiled serializer. */
  operationId: string;
  /** Inserts the table's rows. */
  seed(db: Database, rows: number): Promise<void>;
  /** The limit's statement: $1 the user, $2 the rows to read (limit + 1); the record's id must be the first column. */
  select: string;
  /** The limit's item from a row of `select` (for fields Postgres does not give in the API's form). */
  item?(row: Record<string, unknown>, userId: string): unknown;
}

/** The same id for row `g` of every table: uuid-shaped and ordered like the service's uuidv7 ids. */
const id = `'01936d2e-7b1a-7c3e-' || lpad(g::text, 12, '0')`;
const owner = `case when g % 100 = 0 then 'bench-user' else 'bench-other-' || (g % 97) end`;
const ms = (column: string) => `floor(extract(epoch from ${column}) * 1000)::int8`;

async function fill(db: Database, table: string, columns: Record<string, string>, rows: number): Promise<void> {
  const names = ['id', 'owner_user_id', ...Object.keys(columns), 'created_at', 'updated_at'];
  const values = [id, owner, ...Object.values(columns), 'now()', 'now()'];
  await sql.raw(`insert into ${table} (${names.join(', ')}) select ${values.join(', ')} from generate_series(1, ${rows}) as g`).execute(db);
  await sql.raw(`analyze ${table}`).execute(db);
}

const FILE_SELECT = `select id as "fileId", owner_user_id as "ownerUserId", kind, name, mime_type as "mimeType", size_bytes as "sizeBytes", status, sha256,
  project_id as "projectId", parent_id as "parentId", conversation_id as "conversationId",
  ingest_status, ingest_progress, chunk_count, ingest_error,
  coalesce((select array_agg(s.grantee_user_id order by s.grantee_user_id) from file_shares s where s.file_id = f.id), '{}') as shared_with,
  ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"`;

export const LIST_ROUTES: ListRoute[] = [
  {
    name: 'notes',
    items: 'notes',
    operationId: 'getNotes',
    seed: (db, rows) => fill(db, 'notes', { title: `'Bench note ' || g`, content: `repeat('Content of bench note ' || g || '. ', 4)` }, rows),
    select: `select id as "noteId", title, content, project_id as "projectId", pinned, ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from notes where owner_user_id = $1 order by id desc limit $2`,
  },
  {
    name: 'memory',
    items: 'memoryItems',
    operationId: 'getMemory',
    seed: (db, rows) =>
      fill(db, 'memory_items', { kind: `'fact'`, content: `'The user prefers bench item ' || g`, content_key: `'bench-' || g`, source: `'user'` }, rows),
    select: `select id as "memoryId", kind, content, project_id as "projectId", source, source_ref as "sourceRef",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from memory_items where owner_user_id = $1 order by id desc limit $2`,
  },
  {
    name: 'projects',
    items: 'projects',
    operationId: 'getProjects',
    seed: (db, rows) => fill(db, 'projects', { name: `'Bench project ' || g`, description: `'A project of the bench, number ' || g` }, rows),
    select: `select id as "projectId", name, description, instructions, color, parent_id as "parentId", client_id as "clientId",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from projects where owner_user_id = $1 order by id desc limit $2`,
  },
  {
    name: 'skills',
    items: 'skills',
    operationId: 'getSkills',
    seed: (db, rows) => fill(db, 'skills', { name: `'Bench skill ' || g`, instructions: `'Answer as bench skill ' || g || ' would.'` }, rows),
    select: `select id as "skillId", name, description, instructions, greeting, enabled, project_id as "projectId",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from skills where owner_user_id = $1 order by id desc limit $2`,
  },
  {
    name: 'files',
    items: 'files',
    operationId: 'getFiles',
    // Files not yet uploaded: no content URL to sign, and no shares.
    seed: (db, rows) => fill(db, 'files', { kind: `'file'`, name: `'bench-' || g || '.txt'`, mime_type: `'text/plain'`, size_bytes: '1024', status: `'pending'` }, rows),
    // The caller's own files and those shared with it, each read newest first from its own index.
    select: `select * from (${FILE_SELECT} from files f where owner_user_id = $1 order by id desc limit $2) as owned
             union all
             select * from (${FILE_SELECT} from files f where owner_user_id <> $1
                              and exists (select 1 from file_shares s where s.file_id = f.id and s.grantee_user_id = $1)
                            order by id desc limit $2) as shared
             order by "fileId" desc limit $2`,
    item: (r, userId) => ({
      fileId: r.fileId,
      ownerUserId: r.ownerUserId,
      access: r.ownerUserId === userId ? 'owner' : 'shared',
      kind: r.kind,
      name: r.name,
      mimeType: r.mimeType,
      sizeBytes: r.sizeBytes,
      status: r.status,
      sha256: r.sha256,
      projectId: r.projectId,
      parentId: r.parentId,
      conversationId: r.conversationId,
      ingestion: { status: r.ingest_status, progress: r.ingest_progress, chunkCount: r.chunk_count, error: r.ingest_error },
      sharedWith: r.ownerUserId === userId ? r.shared_with : [],
      contentUrl: null,
      contentUrlExpiresAt: null,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt,
    }),
  },
  {
    name: 'conversations',
    items: 'conversations',
    operationId: 'getConversations',
    seed: (db, rows) => fill(db, 'conversations', { title: `'Bench conversation ' || g` }, rows),
    select: `select id as "conversationId", title, project_id as "projectId", archived, model, ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from conversations where owner_user_id = $1 order by id desc limit $2`,
  },
  {
    name: 'automations',
    items: 'automations',
    operationId: 'getAutomations',
    seed: (db, rows) =>
      fill(db, 'automations', { name: `'Bench automation ' || g`, prompt: `'Summarize the day, number ' || g`, enabled: 'false', output_format: `'markdown'` }, rows),
    select: `select id as "automationId", name, prompt,
             case when cron is not null and timezone is not null then json_build_object('cron', cron, 'timezone', timezone) end as schedule,
             enabled, project_id as "projectId", skill_ids as "skillIds", model, output_format as "outputFormat",
             case when cron is not null and timezone is not null and enabled then ${ms('next_run_at')} end as "nextRunAt",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from automations where owner_user_id = $1 order by id desc limit $2`,
  },
  {
    name: 'webhooks',
    items: 'subscriptions',
    operationId: 'getWebhooks',
    seed: (db, rows) =>
      fill(db, 'webhook_subscriptions', { url: `'https://hooks.example.com/bench/' || g`, events: `array['note.created']`, enabled: 'true', secret: `'bench-secret-' || g` }, rows),
    select: `select id as "subscriptionId", url, description, events, enabled,
             case when not enabled then 'disabled' when failing_since is not null then 'failing' else 'active' end as status,
             case when enabled then null else coalesce(disabled_reason, 'user') end as "disabledReason",
             case when enabled then null else ${ms('disabled_at')} end as "disabledAt",
             ${ms('failing_since')} as "failingSince",
             case when previous_secret_expires_at > now() then ${ms('previous_secret_expires_at')} end as "previousSecretExpiresAt",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from webhook_subscriptions where owner_user_id = $1 order by id desc limit $2`,
  },
];
