/**
 * The list routes B1 measures: how each table is filled (100,000 rows of the service's own schema,
 * one in a hundred the bench user's) and how its first page (`GET ?limit=20`) is read by the two
 * contenders B1 sets against the service:
 *   - the limit (bench/baseline.ts) runs one statement per route, its columns named and ordered as
 *     the API's fields, timestamps as epoch milliseconds computed by Postgres;
 *   - the peer (bench/peer.ts) builds with Kysely the statement the service runs (the service's
 *     columns, timestamps as epoch milliseconds computed by Postgres) and presents each row as the
 *     API's item, as a plain app's repository and presenter would.
 */
import { type Kysely, sql } from 'kysely';
import type { DB } from '../generated/db';
import { epochMs, epochMsOrNull } from '../src/platform/db/timestamps';

/** An API item, its id first. */
export type Item = Record<string, unknown>;

export interface ListRoute {
  /** The collection's name, the path under /api/v1 of the service, the peer and the limit. */
  name: string;
  /** The page's array property. */
  items: string;
  /** Inserts the table's rows. */
  seed(db: Kysely<DB>, rows: number): Promise<void>;
  /** The limit's statement: $1 the user, $2 the rows to read (limit + 1); the record's id must be the first column. */
  select: string;
  /** The limit's item from a row of `select` (for fields Postgres does not give in the API's form). */
  item?(row: Record<string, unknown>, userId: string): Item;
  /** The peer's read: the user's `rows` newest records (limit + 1), as API items. */
  page(db: Kysely<DB>, userId: string, rows: number): Promise<Item[]>;
}

/** The same id for row `g` of every table: uuid-shaped and ordered like the service's uuidv7 ids. */
const id = `'01936d2e-7b1a-7c3e-' || lpad(g::text, 12, '0')`;
const owner = `case when g % 100 = 0 then 'bench-user' else 'bench-other-' || (g % 97) end`;
const ms = (column: string) => `floor(extract(epoch from ${column}) * 1000)::int8`;

async function fill(db: Kysely<DB>, table: string, columns: Record<string, string>, rows: number): Promise<void> {
  const names = ['id', 'owner_user_id', ...Object.keys(columns), 'created_at', 'updated_at'];
  const values = [id, owner, ...Object.values(columns), 'now()', 'now()'];
  await sql.raw(`insert into ${table} (${names.join(', ')}) select ${values.join(', ')} from generate_series(1, ${rows}) as g`).execute(db);
  await sql.raw(`analyze ${table}`).execute(db);
}

/** A file's columns as the service reads them for its list; the limit and the peer present them alike (`fileItem`). */
const FILE_COLUMNS = [
  'id',
  'owner_user_id',
  'kind',
  'name',
  'mime_type',
  'size_bytes',
  'status',
  'sha256',
  'project_id',
  'parent_id',
  'conversation_id',
  'ingest_status',
  'ingest_progress',
  'chunk_count',
  'ingest_error',
] as const;

const FILE_SELECT = `select ${FILE_COLUMNS.join(', ')},
  coalesce((select array_agg(ag.principal_id order by ag.principal_id) from access_grants ag
            where ag.resource_kind = 'file' and ag.resource_id = f.id and ag.principal_kind = 'user'), '{}') as shared_with,
  ${ms('created_at')} as created_at, ${ms('updated_at')} as updated_at`;

/** A listed file as the API gives it to `userId` (files not yet uploaded: no content URL). */
function fileItem(r: Record<string, unknown>, userId: string): Item {
  return {
    fileId: r.id,
    ownerUserId: r.owner_user_id,
    access: r.owner_user_id === userId ? 'owner' : 'shared',
    kind: r.kind,
    name: r.name,
    mimeType: r.mime_type,
    sizeBytes: r.size_bytes,
    status: r.status,
    sha256: r.sha256,
    projectId: r.project_id,
    parentId: r.parent_id,
    conversationId: r.conversation_id,
    ingestion: { status: r.ingest_status, progress: r.ingest_progress, chunkCount: r.chunk_count, error: r.ingest_error },
    sharedWith: r.owner_user_id === userId ? r.shared_with : [],
    contentUrl: null,
    contentUrlExpiresAt: null,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The peer's page of files: the user's own and those shared with them, each part read newest first from its own index, as the service reads them. */
async function filePage(db: Kysely<DB>, userId: string, rows: number): Promise<Item[]> {
  const part = (owned: boolean) => {
    const query = db
      .selectFrom('files')
      .select([...FILE_COLUMNS, epochMs('created_at'), epochMs('updated_at')])
      .select(
        sql<string[]>`coalesce((select array_agg(ag.principal_id order by ag.principal_id) from access_grants ag
                                 where ag.resource_kind = 'file' and ag.resource_id = files.id and ag.principal_kind = 'user'
                                   and files.owner_user_id = ${userId}), '{}')`.as('shared_with'),
      );
    const mine = owned
      ? query.where('owner_user_id', '=', userId)
      : query.where('owner_user_id', '<>', userId).where(
          sql<boolean>`exists (select 1 from access_grants ag where ag.resource_kind = 'file' and ag.resource_id = files.id
                                   and ag.principal_kind = 'user' and ag.principal_id = ${userId})`,
        );
    return mine.orderBy('id', 'desc').limit(rows);
  };
  const found = await db
    .selectFrom(part(true).as('owned'))
    .selectAll()
    .unionAll(db.selectFrom(part(false).as('shared')).selectAll())
    .orderBy('id', 'desc')
    .limit(rows)
    .execute();
  return found.map((row) => fileItem(row, userId));
}

export const LIST_ROUTES: ListRoute[] = [
  {
    name: 'notes',
    items: 'notes',
    seed: (db, rows) =>
      fill(db, 'notes', { title: `'Bench note ' || g`, content: `repeat('Content of bench note ' || g || '. ', 4)` }, rows),
    select: `select id as "noteId", title, content, project_id as "projectId", pinned, ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from notes where owner_user_id = $1 order by id desc limit $2`,
    page: async (db, userId, rows) =>
      (
        await db
          .selectFrom('notes')
          .select(['id', 'title', 'content', 'project_id', 'pinned', epochMs('created_at'), epochMs('updated_at')])
          .where('owner_user_id', '=', userId)
          .orderBy('id', 'desc')
          .limit(rows)
          .execute()
      ).map((r) => ({
        noteId: r.id,
        title: r.title,
        content: r.content,
        projectId: r.project_id,
        pinned: r.pinned,
        createdAt: r.created_at,
        updatedAt: r.updated_at,
      })),
  },
  {
    name: 'memory',
    items: 'memoryItems',
    seed: (db, rows) =>
      fill(
        db,
        'memory_items',
        { kind: `'fact'`, content: `'The user prefers bench item ' || g`, content_key: `'bench-' || g`, source: `'user'` },
        rows,
      ),
    select: `select id as "memoryId", kind, content, project_id as "projectId", source, source_ref as "sourceRef",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from memory_items where owner_user_id = $1 order by id desc limit $2`,
    page: async (db, userId, rows) =>
      (
        await db
          .selectFrom('memory_items')
          .select(['id', 'kind', 'content', 'project_id', 'source', 'source_ref', epochMs('created_at'), epochMs('updated_at')])
          .where('owner_user_id', '=', userId)
          .orderBy('id', 'desc')
          .limit(rows)
          .execute()
      ).map((r) => ({
        memoryId: r.id,
        kind: r.kind,
        content: r.content,
        projectId: r.project_id,
        source: r.source,
        sourceRef: r.source_ref,
        createdAt: r.created_at,
        updatedAt: r.updated_at,
      })),
  },
  {
    name: 'projects',
    items: 'projects',
    seed: (db, rows) =>
      fill(db, 'projects', { name: `'Bench project ' || g`, description: `'A project of the bench, number ' || g` }, rows),
    select: `select id as "projectId", name, description, instructions, color, parent_id as "parentId", client_id as "clientId",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from projects where owner_user_id = $1 order by id desc limit $2`,
    page: async (db, userId, rows) =>
      (
        await db
          .selectFrom('projects')
          .select([
            'id',
            'name',
            'description',
            'instructions',
            'color',
            'parent_id',
            'client_id',
            epochMs('created_at'),
            epochMs('updated_at'),
          ])
          .where('owner_user_id', '=', userId)
          .orderBy('id', 'desc')
          .limit(rows)
          .execute()
      ).map((r) => ({
        projectId: r.id,
        name: r.name,
        description: r.description,
        instructions: r.instructions,
        color: r.color,
        parentId: r.parent_id,
        clientId: r.client_id,
        createdAt: r.created_at,
        updatedAt: r.updated_at,
      })),
  },
  {
    name: 'skills',
    items: 'skills',
    seed: (db, rows) =>
      fill(db, 'skills', { name: `'Bench skill ' || g`, instructions: `'Answer as bench skill ' || g || ' would.'` }, rows),
    select: `select id as "skillId", name, description, instructions, greeting, enabled, project_id as "projectId",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from skills where owner_user_id = $1 order by id desc limit $2`,
    page: async (db, userId, rows) =>
      (
        await db
          .selectFrom('skills')
          .select([
            'id',
            'name',
            'description',
            'instructions',
            'greeting',
            'enabled',
            'project_id',
            epochMs('created_at'),
            epochMs('updated_at'),
          ])
          .where('owner_user_id', '=', userId)
          .orderBy('id', 'desc')
          .limit(rows)
          .execute()
      ).map((r) => ({
        skillId: r.id,
        name: r.name,
        description: r.description,
        instructions: r.instructions,
        greeting: r.greeting,
        enabled: r.enabled,
        projectId: r.project_id,
        createdAt: r.created_at,
        updatedAt: r.updated_at,
      })),
  },
  {
    name: 'files',
    items: 'files',
    // Files not yet uploaded: no content URL to sign, and no shares.
    seed: (db, rows) =>
      fill(
        db,
        'files',
        { kind: `'file'`, name: `'bench-' || g || '.txt'`, mime_type: `'text/plain'`, size_bytes: '1024', status: `'pending'` },
        rows,
      ),
    // The caller's own files and those shared with it, each read newest first from its own index.
    select: `select * from (${FILE_SELECT} from files f where owner_user_id = $1 order by id desc limit $2) as owned
             union all
             select * from (${FILE_SELECT} from files f where owner_user_id <> $1
                              and exists (select 1 from access_grants ag where ag.resource_kind = 'file' and ag.resource_id = f.id
                                            and ag.principal_kind = 'user' and ag.principal_id = $1)
                            order by id desc limit $2) as shared
             order by id desc limit $2`,
    item: fileItem,
    page: filePage,
  },
  {
    name: 'conversations',
    items: 'conversations',
    seed: (db, rows) => fill(db, 'conversations', { title: `'Bench conversation ' || g` }, rows),
    select: `select id as "conversationId", title, project_id as "projectId", archived, model, ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from conversations where owner_user_id = $1 order by id desc limit $2`,
    page: async (db, userId, rows) =>
      (
        await db
          .selectFrom('conversations')
          .select(['id', 'title', 'project_id', 'archived', 'model', epochMs('created_at'), epochMs('updated_at')])
          .where('owner_user_id', '=', userId)
          .orderBy('id', 'desc')
          .limit(rows)
          .execute()
      ).map((r) => ({
        conversationId: r.id,
        title: r.title,
        projectId: r.project_id,
        archived: r.archived,
        model: r.model,
        createdAt: r.created_at,
        updatedAt: r.updated_at,
      })),
  },
  {
    name: 'automations',
    items: 'automations',
    seed: (db, rows) =>
      fill(
        db,
        'automations',
        { name: `'Bench automation ' || g`, prompt: `'Summarize the day, number ' || g`, enabled: 'false', output_format: `'markdown'` },
        rows,
      ),
    select: `select id as "automationId", name, prompt,
             case when cron is not null and timezone is not null then json_build_object('cron', cron, 'timezone', timezone) end as schedule,
             enabled, project_id as "projectId", skill_ids as "skillIds", model, output_format as "outputFormat",
             case when cron is not null and timezone is not null and enabled then ${ms('next_run_at')} end as "nextRunAt",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from automations where owner_user_id = $1 order by id desc limit $2`,
    page: async (db, userId, rows) =>
      (
        await db
          .selectFrom('automations')
          .select([
            'id',
            'name',
            'prompt',
            'cron',
            'timezone',
            'enabled',
            'project_id',
            'skill_ids',
            'model',
            'output_format',
            epochMsOrNull('next_run_at'),
            epochMs('created_at'),
            epochMs('updated_at'),
          ])
          .where('owner_user_id', '=', userId)
          .orderBy('id', 'desc')
          .limit(rows)
          .execute()
      ).map((r) => {
        const scheduled = r.cron !== null && r.timezone !== null;
        return {
          automationId: r.id,
          name: r.name,
          prompt: r.prompt,
          schedule: scheduled ? { cron: r.cron, timezone: r.timezone } : null,
          enabled: r.enabled,
          projectId: r.project_id,
          skillIds: r.skill_ids,
          model: r.model,
          outputFormat: r.output_format,
          nextRunAt: scheduled && r.enabled ? r.next_run_at : null,
          createdAt: r.created_at,
          updatedAt: r.updated_at,
        };
      }),
  },
  {
    name: 'webhooks',
    items: 'subscriptions',
    seed: (db, rows) =>
      fill(
        db,
        'webhook_subscriptions',
        {
          url: `'https://hooks.example.com/bench/' || g`,
          events: `array['note.created']`,
          enabled: 'true',
          secret: `'bench-secret-' || g`,
        },
        rows,
      ),
    select: `select id as "subscriptionId", url, description, events, enabled,
             case when not enabled then 'disabled' when failing_since is not null then 'failing' else 'active' end as status,
             case when enabled then null else coalesce(disabled_reason, 'user') end as "disabledReason",
             case when enabled then null else ${ms('disabled_at')} end as "disabledAt",
             ${ms('failing_since')} as "failingSince",
             case when previous_secret_expires_at > now() then ${ms('previous_secret_expires_at')} end as "previousSecretExpiresAt",
             ${ms('created_at')} as "createdAt", ${ms('updated_at')} as "updatedAt"
             from webhook_subscriptions where owner_user_id = $1 order by id desc limit $2`,
    page: async (db, userId, rows) =>
      (
        await db
          .selectFrom('webhook_subscriptions')
          .select([
            'id',
            'url',
            'description',
            'events',
            'enabled',
            'disabled_reason',
            epochMsOrNull('failing_since'),
            epochMsOrNull('disabled_at'),
            epochMsOrNull('previous_secret_expires_at'),
            epochMs('created_at'),
            epochMs('updated_at'),
          ])
          .where('owner_user_id', '=', userId)
          .orderBy('id', 'desc')
          .limit(rows)
          .execute()
      ).map((r) => ({
        subscriptionId: r.id,
        url: r.url,
        description: r.description,
        events: r.events,
        enabled: r.enabled,
        status: !r.enabled ? 'disabled' : r.failing_since !== null ? 'failing' : 'active',
        disabledReason: r.enabled ? null : (r.disabled_reason ?? 'user'),
        disabledAt: r.enabled ? null : r.disabled_at,
        failingSince: r.failing_since,
        previousSecretExpiresAt:
          r.previous_secret_expires_at !== null && r.previous_secret_expires_at > Date.now() ? r.previous_secret_expires_at : null,
        createdAt: r.created_at,
        updatedAt: r.updated_at,
      })),
  },
];
