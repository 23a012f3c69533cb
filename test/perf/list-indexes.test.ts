/**
 * Every filtered list route at a million rows (issue 58): each page, of each filter shape, reads a
 * bounded number of buffers, so that its cost does not grow with the owner's rows.
 *
 * Postgres only (DATABASE_URL): the test creates its own database on the server, migrates it to
 * the latest migration, seeds 1,000,000 rows into each filtered collection by SQL (one
 * `insert … select from generate_series` per table), and runs `EXPLAIN (ANALYZE, BUFFERS)` on the
 * very SQL the repositories send (recorded from a Kysely instance as it runs each page), under a
 * custom and a generic plan. The embedded PGlite is skipped: seeding 17 million rows into the
 * database in WebAssembly would take many minutes.
 *
 * The worst cases are seeded on purpose: one user owns 98% of each table; the rare value of each
 * filter (a project, `pinned`, a status, a kind…) matches only the user's 40 oldest rows, so a
 * page read through the owner's index and filtered afterwards walks past a million newer rows.
 */
import { randomUUID } from 'node:crypto';
import { type CompiledQuery, Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DB } from '../../generated/db';
import * as accessTokens from '../../src/areas/access-tokens/repository';
import * as agents from '../../src/areas/agents/repository';
import * as audit from '../../src/areas/audit/repository';
import * as automations from '../../src/areas/automations/repository';
import * as budgets from '../../src/areas/budgets/repository';
import * as approvals from '../../src/areas/conversations/repository/approvals';
import * as conversations from '../../src/areas/conversations/repository/conversations';
import * as messages from '../../src/areas/conversations/repository/messages';
import * as feedback from '../../src/areas/feedback/repository';
import * as files from '../../src/areas/files/repository';
import * as mcpApprovals from '../../src/areas/mcp-server/repository';
import * as memory from '../../src/areas/memory/repository';
import * as notes from '../../src/areas/notes/repository';
import * as outputs from '../../src/areas/outputs/repository';
import * as projects from '../../src/areas/projects/repository';
import * as skills from '../../src/areas/skills/repository';
import * as webhooks from '../../src/areas/webhooks/repository';
import { openPostgres } from '../../src/platform/db';
import { type SharedProject, sharedProjects } from '../../src/platform/db/access';
import { migrateToLatest } from '../../src/platform/db/migrate';
import type { PageRequest } from '../../src/platform/pagination';

const ROWS = 1_000_000;
/** The rare value of each filter matches the target user's oldest RARE rows. */
const RARE = 40;
const LIMIT = 20;
/**
 * The most shared buffers (hit + read) one page may touch. A page read from an index in keyset
 * order touches the index's descent (3–4 pages), at most `limit + 1` heap pages and, for the pages
 * that read more per row (a file's grantees, a delivery's event, a feedback's message), 2–4 index
 * and heap pages per row: about 100 for the widest page seeded here. A page that filters or sorts
 * the owner's rows touches thousands (1M rows are 10,000 to 40,000 pages), so 300 leaves room for
 * the planner's choices without letting one such page through.
 */
const MAX_BUFFERS = 300;

/**
 * The files shared with u1. The shared part of a files page is read from the user's shares (its
 * own index), each share costing its file's lookup (4 buffers): its cost grows with the files
 * shared with the user that a filter skips, not with anyone's million files, and no index on
 * `files` can bound it. Fifty shares keep it within MAX_BUFFERS.
 */
const SHARES = 50;
const id = (i: number) => `01900000-0000-7000-8000-${i.toString(16).padStart(12, '0')}`;
const ID = "'01900000-0000-7000-8000-' || lpad(to_hex(i), 12, '0')";
/**
 * The target user, u1, owns all but every fiftieth row, which belong to a thousand other users
 * (so that the planner's statistics see many owners, as a deployment's would).
 */
const OWNER = "case when i % 50 = 0 then 'u' || (2 + (i / 50) % 1000) else 'u1' end";
/** u1's rows are in c_big (the 40 oldest in c_rare), the other users' each in its own conversation (a seeded one). */
const CONVERSATION = `case when i % 50 = 0 then ${ID} when i <= ${RARE} then 'c_rare' else 'c_big' end`;
const rare = (value: string, otherwise: string) => `case when i <= ${RARE} then ${value} else ${otherwise} end`;
/** u1's notes and files are in u1's projects (the 40 oldest in p_rare); each other user's in their own project of the same id. */
const IN_PROJECT = `case when i % 50 = 0 then ${ID} else ${rare("'p_rare'", "'p_' || (i % 20)")} end`;
/** The projects shared with u1 and their owners, read once seeded (what the services pass to the notes and files lists). */
const SHARED: SharedProject[] = [];
const series = `from generate_series(1, ${ROWS}) i`;

/** The rows a few collections point to (projects, folders, the conversation of the messages…). */
const PARENTS = [
  `insert into projects (id, owner_user_id, name) select 'p_' || g, 'u1', 'P' || g from generate_series(0, 19) g`,
  `insert into projects (id, owner_user_id, name) values ('p_rare', 'u1', 'rare')`,
  `insert into files (id, owner_user_id, kind, name, status) select 'f_' || g, 'u1', 'folder', 'F' || g, 'ready' from generate_series(0, 19) g`,
  `insert into files (id, owner_user_id, kind, name, status) values ('f_rare', 'u1', 'folder', 'rare', 'ready')`,
  `insert into conversations (id, owner_user_id) values ('c_big', 'u1'), ('c_rare', 'u1')`,
  // Each other user's webhook subscription and agent environment (their deliveries' and commands').
  `insert into webhook_subscriptions (id, owner_user_id, url, events, enabled, secret)
     select 's_u' || g, 'u' || g, 'https://example.com/', '{}', true, 's' from generate_series(2, 1001) g`,
  `insert into agent_environments (id, owner_user_id, name, platform, protocol_version, credential_hash)
     select 'env_u' || g, 'u' || g, '', 'linux', 1, 'h' from generate_series(2, 1001) g`,
  `insert into automations (id, owner_user_id, name, prompt, enabled, output_format)
     select g, 'u1', g, 'p', true, 'text' from unnest(array['a_rare', 'a_0', 'a_1', 'a_2', 'a_3', 'a_4', 'a_5', 'a_6', 'a_7', 'a_8', 'a_9']) g`,
  `insert into webhook_subscriptions (id, owner_user_id, url, events, enabled, secret)
     select g, 'u1', 'https://example.com/' || g, '{}', true, 's' from unnest(array['s_rare', 's_0', 's_1', 's_2', 's_3', 's_4', 's_5', 's_6', 's_7', 's_8', 's_9']) g`,
  `insert into webhook_events (id, owner_user_id, type, body) values ('e_1', 'u1', 'note.created', '{}')`,
  `insert into agent_environments (id, owner_user_id, name, platform, protocol_version, credential_hash) values ('env_big', 'u1', 'big', 'linux', 1, 'h')`,
];

/** One statement per collection: a million rows each. */
const SEEDS: Record<string, string> = {
  notes: `insert into notes (id, owner_user_id, project_id, pinned)
    select ${ID}, ${OWNER}, ${IN_PROJECT}, i <= ${RARE} ${series}`,
  memory_items: `insert into memory_items (id, owner_user_id, project_id, kind, content, content_key, source)
    select ${ID}, ${OWNER}, ${rare("'p_rare'", "'p_' || (i % 20)")}, ${rare("'preference'", "'fact'")}, '', i::text, 'user' ${series}`,
  projects: `insert into projects (id, owner_user_id, name, parent_id)
    select ${ID}, ${OWNER}, '', ${rare("'p_rare'", "'p_' || (i % 20)")} ${series}`,
  skills: `insert into skills (id, owner_user_id, project_id, name, enabled)
    select ${ID}, ${OWNER}, ${rare("'p_rare'", "'p_' || (i % 20)")}, 's' || i, i > ${RARE} ${series}`,
  files: `insert into files (id, owner_user_id, kind, name, status, project_id, parent_id, conversation_id)
    select ${ID}, ${OWNER}, ${rare("'folder'", "'file'")}, '', ${rare("'failed'", "'ready'")}, ${IN_PROJECT},
           ${rare("'f_rare'", "'f_' || (i % 20)")}, ${rare("'c_rare'", "'c_' || (i % 20)")} ${series}`,
  // Fifty of the other users' files, and ten of their projects, are shared with u1 (the shared parts of u1's lists: see SHARES).
  access_grants: `insert into access_grants (id, resource_kind, resource_id, principal_kind, principal_id, permission, granted_by)
    select ${ID}, 'file', ${ID}, 'user', 'u1', 'read', ${OWNER} ${series} where i % 50 = 0 and i <= 50 * ${SHARES}
    union all
    select 'g' || ${ID}, 'project', ${ID}, 'user', 'u1', 'read', ${OWNER} ${series} where i % 50 = 0 and i <= 50 * ${SHARES / 5}`,
  outputs: `insert into outputs (id, owner_user_id, type, name, mime_type, size_bytes, sha256, storage_key, origin,
                                 conversation_id, automation_id, project_id, generation_id)
    select ${ID}, ${OWNER}, ${rare("'video'", "'image'")}, '', 'image/png', 1, '', '', ${rare("'speech'", "'image_generation'")},
           ${rare("'c_rare'", "'c_' || (i % 20)")}, ${rare("'a_rare'", "'a_' || (i % 20)")}, ${rare("'p_rare'", "'p_' || (i % 20)")},
           ${rare("'g_rare'", "'g_' || (i / 4)")} ${series}`,
  conversations: `insert into conversations (id, owner_user_id, project_id, archived, temporary)
    select ${ID}, ${OWNER}, ${rare("'p_rare'", "'p_' || (i % 20)")}, i <= ${RARE}, i % 1000 = 1 ${series}`,
  // u1's messages are in c_big (40 in c_rare); the other users' each in a conversation of their own (of the seeded ones).
  messages: `insert into messages (id, conversation_id, owner_user_id, role, kind, status)
    select ${ID}, ${CONVERSATION}, ${OWNER}, 'assistant', 'reply', 'complete' ${series}`,
  message_feedback: `insert into message_feedback (id, message_id, conversation_id, user_id, rating, created_at, updated_at)
    select ${ID}, ${ID}, ${CONVERSATION}, ${OWNER}, ${rare("'down'", "'up'")}, now(), now() ${series}`,
  // Chat approvals of u1 in c_big (one per message), every tenth an MCP call's; the oldest pending.
  tool_approvals: `insert into tool_approvals (id, user_id, origin, conversation_id, message_id, tool_call_id, tool_name, arguments,
                                               arguments_digest, status, created_at, expires_at)
    select ${ID}, ${OWNER}, case when i % 10 = 0 then 'mcp' else 'chat' end,
           case when i % 10 = 0 then null else 'c_big' end, case when i % 10 = 0 then null else ${ID} end, 't' || i, 'tool', '{}',
           i::text, ${rare("'pending'", "'approved'")}, now(), now() + interval '1 day' ${series}`,
  automations: `insert into automations (id, owner_user_id, name, prompt, enabled, output_format)
    select ${ID}, ${OWNER}, '', '', i > ${RARE}, 'text' ${series}`,
  automation_runs: `insert into automation_runs (id, automation_id, owner_user_id, status, trigger)
    select ${ID}, ${rare("'a_rare'", `case when i % 50 = 0 then ${ID} else 'a_' || (i % 10) end`)}, ${OWNER},
           ${rare("'failed'", "'succeeded'")}, 'manual' ${series}`,
  webhook_deliveries: `insert into webhook_deliveries (id, subscription_id, event_id, owner_user_id, status, max_attempts, next_attempt_at)
    select ${ID}, ${rare("'s_rare'", `case when i % 50 = 0 then 's_' || ${OWNER} else 's_' || (i % 10) end`)}, 'e_1', ${OWNER},
           ${rare("'failed'", "'succeeded'")}, 8, now() ${series}`,
  agent_commands: `insert into agent_commands (id, environment_id, type, payload, status, expires_at)
    select ${ID}, case when i % 50 = 0 then 'env_' || ${OWNER} else 'env_big' end, 'read', '{}', ${rare("'rejected'", "'accepted'")}, now() ${series}`,
  audit_events: `insert into audit_events (id, action, actor_user_id, resource_type, outcome)
    select ${ID}, ${rare("'rare.action'", "'common.' || (i % 20)")}, ${rare("'u_rare'", "'u' || (i % 1000)")},
           ${rare("'rare_type'", "'type_' || (i % 20)")}, 'success' ${series}`,
  ledger_entries: `insert into ledger_entries (id, user_id, amount_cents, balance_after_cents, kind, actor_user_id)
    select ${ID}, ${rare("'u_rare'", OWNER)}, 1, i, 'adjustment', 'admin' ${series}`,
  access_tokens: `insert into access_tokens (id, owner_user_id, name, lookup, secret_hash, scopes, created_at, expires_at)
    select ${ID}, ${rare("'u_rare'", OWNER)}, '', 'l' || i, '', '{}', now(), now() + interval '1 day' ${series}`,
};

type Args = Record<string, unknown>;
/** A list route's page function: the repository's, with the arguments its service passes. */
type Lister = (db: Kysely<DB>, args: Args, page: PageRequest) => Promise<unknown>;

interface Route {
  route: string;
  list: Lister;
  /** The filter shapes: the arguments each adds to `base`. */
  shapes: Record<string, Args>;
  base: Args;
}

const page = (list: { page: (db: Kysely<DB>, args: never, page: PageRequest) => Promise<unknown> }): Lister => {
  return (db, args, p) => list.page(db, args as never, p);
};

const NOW = new Date();
const ROUTES: Route[] = [
  {
    route: 'GET /notes',
    list: page(notes.readableNoteList),
    base: { userId: 'u1', shared: SHARED },
    shapes: {
      none: {},
      'scope=owned': { scope: 'owned' },
      'scope=shared': { scope: 'shared' },
      'projectId (rare)': { projectId: 'p_rare' },
      'projectId (common)': { projectId: 'p_3' },
      'pinned=true (rare)': { pinned: true },
      'pinned=false': { pinned: false },
      'projectId (rare) & pinned=true': { projectId: 'p_rare', pinned: true },
    },
  },
  {
    route: 'GET /memory',
    list: page(memory.memoryItemList),
    base: { ownerUserId: 'u1' },
    shapes: {
      none: {},
      'kind=preference (rare)': { kind: 'preference' },
      'kind=fact': { kind: 'fact' },
      'projectId (rare)': { projectId: 'p_rare' },
      'projectId (rare) & kind=preference': { projectId: 'p_rare', kind: 'preference' },
    },
  },
  {
    route: 'GET /projects',
    list: page(projects.readableProjectList),
    base: { userId: 'u1' },
    shapes: {
      none: {},
      'scope=shared': { scope: 'shared' },
      'parentId (rare)': { parentId: 'p_rare' },
      'parentId (common)': { parentId: 'p_3' },
    },
  },
  {
    route: 'GET /skills',
    list: page(skills.skillList),
    base: { userId: 'u1' },
    shapes: {
      none: {},
      'projectId (rare)': { projectId: 'p_rare' },
      'enabled=false (rare)': { enabled: false },
      'enabled=true': { enabled: true },
    },
  },
  {
    route: 'GET /files',
    list: page(files.readableFileList),
    base: { userId: 'u1', shared: SHARED },
    shapes: {
      'scope=all': { scope: 'all' },
      'scope=owned': { scope: 'owned' },
      'scope=shared': { scope: 'shared' },
      'projectId (rare)': { scope: 'all', projectId: 'p_rare' },
      'parentId (rare)': { scope: 'all', parentId: 'f_rare' },
      'kind=folder (rare)': { scope: 'all', kind: 'folder' },
      'status=failed (rare)': { scope: 'all', status: 'failed' },
      'conversationId (rare)': { scope: 'all', conversationId: 'c_rare' },
      'scope=owned & parentId (rare)': { scope: 'owned', parentId: 'f_rare' },
      'parentId (rare) & kind=folder': { scope: 'all', parentId: 'f_rare', kind: 'folder' },
    },
  },
  {
    route: 'GET /outputs',
    list: page(outputs.outputList),
    base: { ownerUserId: 'u1' },
    shapes: {
      none: {},
      'type=video (rare)': { type: 'video' },
      'origin=speech (rare)': { origin: 'speech' },
      'conversationId (rare)': { conversationId: 'c_rare' },
      'automationId (rare)': { automationId: 'a_rare' },
      'projectId (rare)': { projectId: 'p_rare' },
      'generationId (rare)': { generationId: 'g_rare' },
    },
  },
  {
    route: 'GET /conversations',
    list: page(conversations.conversationList),
    // ConversationService.list: temporary conversations are never listed.
    base: { ownerUserId: 'u1', temporary: false },
    shapes: {
      none: {},
      'projectId (rare)': { projectId: 'p_rare' },
      'archived=true (rare)': { archived: true },
      'archived=false': { archived: false },
      'projectId (rare) & archived=true': { projectId: 'p_rare', archived: true },
    },
  },
  {
    route: 'GET /conversations/messages?view=tree',
    list: page(messages.messageList),
    base: {},
    shapes: { 'conversationId (rare)': { conversationId: 'c_rare' }, 'conversationId (common)': { conversationId: 'c_big' } },
  },
  {
    route: 'GET /conversations/messages/feedback',
    list: page(feedback.conversationFeedbackList),
    base: { userId: 'u1' },
    shapes: { 'conversationId (rare)': { conversationId: 'c_rare' }, 'conversationId (common)': { conversationId: 'c_big' } },
  },
  {
    route: 'GET /admin/feedback',
    list: page(feedback.adminFeedbackList),
    base: {},
    shapes: { none: {}, 'rating=down (rare)': { rating: 'down' }, 'rating=up': { rating: 'up' } },
  },
  {
    route: 'GET /approvals',
    list: page(approvals.pendingApprovalList),
    base: { userId: 'u1', now: NOW },
    shapes: { pending: {} },
  },
  {
    route: 'GET /approvals/mcp',
    list: page(mcpApprovals.pendingMcpApprovalList),
    base: { userId: 'u1', now: NOW },
    shapes: { pending: {} },
  },
  {
    route: 'GET /automations',
    list: page(automations.automationList),
    base: { ownerUserId: 'u1' },
    shapes: { none: {}, 'enabled=false (rare)': { enabled: false }, 'enabled=true': { enabled: true } },
  },
  {
    route: 'GET /automations/runs',
    list: page(automations.runList),
    base: { ownerUserId: 'u1' },
    shapes: {
      none: {},
      'automationId (rare)': { automationId: 'a_rare' },
      'automationId (common)': { automationId: 'a_3' },
      'status=failed (rare)': { status: 'failed' },
      'automationId (rare) & status=failed': { automationId: 'a_rare', status: 'failed' },
    },
  },
  {
    route: 'GET /webhooks/deliveries',
    list: page(webhooks.deliveryList),
    base: { ownerUserId: 'u1' },
    shapes: {
      none: {},
      'subscriptionId (rare)': { subscriptionId: 's_rare' },
      'subscriptionId (common)': { subscriptionId: 's_3' },
      'status=failed (rare)': { status: 'failed' },
      'subscriptionId (rare) & status=failed': { subscriptionId: 's_rare', status: 'failed' },
    },
  },
  {
    route: 'GET /agent-environments/{id}/commands',
    list: page(agents.commandList),
    base: { environmentId: 'env_big' },
    shapes: { none: {}, 'status=rejected (rare)': { status: 'rejected' }, 'status=accepted': { status: 'accepted' } },
  },
  {
    route: 'GET /admin/audit',
    // The audit list pages by `before` (the last id) rather than a cursor; its page reads limit + 1.
    list: (db, args, p) => audit.listAuditEvents(db, args, p.beforeId, p.limit + 1),
    base: {},
    shapes: {
      none: {},
      'action (rare)': { action: 'rare.action' },
      'actorUserId (rare)': { actorUserId: 'u_rare' },
      'resourceType (rare)': { resourceType: 'rare_type' },
    },
  },
  {
    route: 'GET /admin/usage',
    list: page(budgets.ledgerEntryList),
    base: {},
    shapes: { 'userId (rare)': { userId: 'u_rare' }, 'userId (common)': { userId: 'u1' } },
  },
  {
    route: 'GET /admin/access-tokens',
    list: page(accessTokens.anyTokenList),
    base: {},
    shapes: { none: {}, 'userId (rare)': { ownerUserId: 'u_rare' }, 'userId (common)': { ownerUserId: 'u1' } },
  },
];

/** First page, a page deep among the common rows, and one among the rare rows (the oldest). */
const PAGES: Array<[string, PageRequest]> = [
  ['first page', { limit: LIMIT, beforeId: null }],
  ['deep page', { limit: LIMIT, beforeId: id(ROWS / 2) }],
  ['deepest page', { limit: LIMIT, beforeId: id(RARE / 2) }],
];

const onPostgres = process.env.TEST_DATABASE_URL ? describe : describe.skip;

onPostgres(
  'list pages at a million rows (Postgres only: seeding 1M rows per collection into the embedded PGlite would take too long)',
  () => {
    const name = `aiws_lists_${process.pid}_${randomUUID().replace(/-/g, '').slice(0, 8)}`;
    const url = () => Object.assign(new URL(process.env.DATABASE_URL as string), { pathname: `/${name}` }).toString();
    let pool: pg.Pool;
    let recorded: CompiledQuery[] = [];
    let db: Kysely<DB>;

    beforeAll(async () => {
      const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await admin.connect();
      // Collated as C: building the indexes of 17 million rows sorts their text keys, several times
      // faster byte by byte than by a locale's rules (the plans are the same).
      await admin.query(`create database ${name} template template0 encoding 'UTF8' lc_collate 'C' lc_ctype 'C'`);
      await admin.end();
      const migrated = await openPostgres(url(), { poolSize: 1 });
      await migrateToLatest(migrated.db);
      await migrated.close();
      pool = new pg.Pool({ connectionString: url(), max: 2 });
      await seed(pool);
      db = new Kysely<DB>({
        dialect: new PostgresDialect({ pool }),
        log: (event) => {
          if (event.level === 'query') recorded.push(event.query);
        },
      });
      SHARED.push(...(await sharedProjects(db, 'u1')));
    }, 600_000);

    afterAll(async () => {
      await db?.destroy();
      if (process.env.LIST_INDEXES_KEEP) return console.log(`kept ${name}`); // to read its plans: drop it by hand
      const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await admin.connect();
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
    });

    test('no page of any filter shape reads more than a few hundred buffers, under a custom or a generic plan', async () => {
      const client = await pool.connect();
      const failures: string[] = [];
      const report: string[] = [];
      try {
        for (const { route, list, base, shapes } of ROUTES) {
          for (const [shape, args] of Object.entries(shapes)) {
            for (const [which, request] of PAGES) {
              recorded = [];
              const items = await list(db, { ...base, ...args }, request);
              if (which === 'first page' && count(items) === 0) failures.push(`${route} ${shape}: the seed gave its first page no rows`);
              expect(recorded).toHaveLength(1);
              const query = recorded[0] as CompiledQuery;
              const costs: string[] = [];
              for (const mode of ['force_custom_plan', 'force_generic_plan'] as const) {
                const { buffers, ms, plan } = await explain(client, query, mode);
                costs.push(`${mode === 'force_custom_plan' ? 'custom' : 'generic'} ${buffers} (${ms.toFixed(1)} ms)`);
                if (buffers > MAX_BUFFERS) {
                  failures.push(
                    `${route} [${shape}] ${which}, ${mode.replace('force_', '').replace('_', ' ')}: ${buffers} buffers (> ${MAX_BUFFERS}): ${plan}`,
                  );
                }
              }
              report.push(`${route} [${shape}] ${which}: ${costs.join(', ')}`);
            }
          }
        }
      } finally {
        client.release();
      }
      if (process.env.LIST_INDEXES_REPORT) console.log(report.join('\n'));
      expect(failures).toEqual([]);
    }, 300_000);
  },
);

function count(result: unknown): number {
  if (Array.isArray(result)) return result.length;
  return (result as { items: unknown[] }).items.length;
}

/** The buffers (shared hit + read) and time of one run of the recorded query under the plan cache mode. */
async function explain(client: pg.PoolClient, query: CompiledQuery, mode: 'force_custom_plan' | 'force_generic_plan') {
  await client.query(`set plan_cache_mode = ${mode}`);
  await client.query(`prepare listed as ${query.sql}`);
  try {
    const args = query.parameters.map((value) => literal(client, value)).join(', ');
    const sql = `explain (analyze, buffers, format json) execute listed${args ? `(${args})` : ''}`;
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: Record<string, number>; 'Execution Time': number }> }>(sql);
    const result = (rows[0] as { 'QUERY PLAN': Array<{ Plan: Record<string, number>; 'Execution Time': number }> })['QUERY PLAN'][0]!;
    const buffers = (result.Plan['Shared Hit Blocks'] ?? 0) + (result.Plan['Shared Read Blocks'] ?? 0);
    return { buffers, ms: result['Execution Time'], plan: outline(result.Plan) };
  } finally {
    await client.query('deallocate listed');
    await client.query('reset plan_cache_mode');
  }
}

/** A plan in one line: its nodes, their indexes and the rows their filters removed. */
function outline(node: Record<string, unknown>): string {
  const index = node['Index Name'] ? ` using ${String(node['Index Name'])}` : '';
  const removed = node['Rows Removed by Filter'] ? ` (${String(node['Rows Removed by Filter'])} rows removed by its filter)` : '';
  const children = (node.Plans as Array<Record<string, unknown>> | undefined) ?? [];
  const below = children.length ? ` > [${children.map(outline).join('; ')}]` : '';
  return `${String(node['Node Type'])}${index}${removed}${below}`;
}

function literal(client: pg.PoolClient, value: unknown): string {
  if (value instanceof Date) return client.escapeLiteral(value.toISOString());
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return client.escapeLiteral(value);
  if (Array.isArray(value)) return `array[${value.map((v) => literal(client, v)).join(', ')}]`;
  throw new Error(`a parameter this test cannot write as a literal: ${JSON.stringify(value)}`);
}

/**
 * Seeds every collection. The migrated tables' keys, indexes and foreign keys are dropped before
 * the inserts and made again after them from their very definitions (building an index over a
 * million rows is several times faster than keeping it up to date row by row), and the test
 * checks that the schema it ends with is the migrated one. The seeded tables (and those whose
 * foreign keys point to them) are made unlogged for the test, which spares the server writing
 * its log of 17 million rows; a table's plans do not depend on it.
 */
async function seed(pool: pg.Pool): Promise<void> {
  const started = Date.now();
  const seeded = Object.keys(SEEDS);
  const { rows: referencing } = await pool.query<{ from: string; to: string }>(
    `select conrelid::regclass::text as from, confrelid::regclass::text as to from pg_constraint where contype = 'f'`,
  );
  const tables = new Set(seeded);
  for (let grew = true; grew;) {
    grew = false;
    for (const fk of referencing) {
      if (tables.has(fk.to) && !tables.has(fk.from)) {
        tables.add(fk.from);
        grew = true;
      }
    }
  }
  const schema = async () => {
    const { rows: constraints } = await pool.query<{ table: string; name: string; definition: string; type: string }>(
      `select conrelid::regclass::text as table, conname as name, pg_get_constraintdef(oid) as definition, contype as type
         from pg_constraint
        where contype in ('p', 'u', 'f') and (conrelid::regclass::text = any($1) or confrelid::regclass::text = any($1))
        order by 1, 2`,
      [[...tables]],
    );
    const { rows: indexes } = await pool.query<{ table: string; name: string; definition: string }>(
      `select tablename as table, indexname as name, indexdef as definition from pg_indexes
        where schemaname = 'public' and tablename = any($1)
          and indexname not in (select conname from pg_constraint where contype in ('p', 'u'))
        order by 1, 2`,
      [seeded],
    );
    return { constraints, indexes };
  };
  const before = await schema();
  const foreign = before.constraints.filter((c) => c.type === 'f');
  const keys = before.constraints.filter((c) => c.type !== 'f' && seeded.includes(c.table));
  for (const statement of PARENTS) await pool.query(statement);
  for (const c of foreign) await pool.query(`alter table ${c.table} drop constraint ${c.name}`);
  for (const c of keys) await pool.query(`alter table ${c.table} drop constraint ${c.name}`);
  for (const i of before.indexes) await pool.query(`drop index ${i.name}`);
  for (const table of tables) await pool.query(`alter table ${table} set unlogged`);

  // Two connections, for the server's two cores: each takes the next table, inserts its rows and builds its keys and indexes.
  const queue = [...seeded];
  const timings: string[] = [];
  const worker = async () => {
    const client = await pool.connect();
    try {
      await client.query(`set maintenance_work_mem = '256MB'`);
      for (let table = queue.shift(); table !== undefined; table = queue.shift()) {
        const t0 = Date.now();
        await client.query(SEEDS[table] as string);
        const t1 = Date.now();
        for (const c of keys.filter((k) => k.table === table))
          await client.query(`alter table ${c.table} add constraint ${c.name} ${c.definition}`);
        for (const i of before.indexes.filter((x) => x.table === table)) await client.query(i.definition);
        const t2 = Date.now();
        await client.query(`analyze ${table}`);
        timings.push(`${table}: insert ${t1 - t0} ms, keys and indexes ${t2 - t1} ms, analyze ${Date.now() - t2} ms`);
      }
    } finally {
      client.release();
    }
  };
  await Promise.all([worker(), worker()]);
  const t3 = Date.now();
  for (const c of foreign) await pool.query(`alter table ${c.table} add constraint ${c.name} ${c.definition}`);
  timings.push(`foreign keys: ${Date.now() - t3} ms; the whole seed: ${Date.now() - started} ms`);
  if (process.env.LIST_INDEXES_REPORT) console.log(timings.join('\n'));
  const after = await schema();
  expect(after).toEqual(before);
}
