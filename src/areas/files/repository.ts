import { type Insertable, type RawBuilder, sql } from 'kysely';
import type { Files } from '../../../generated/db';
import type { Database } from '../../platform/db';
import { fileShared, grantedIds, type SharedProject } from '../../platform/db/access';
import { uuidv7 } from '../../platform/ids';
import { type ListedRecord, listQuery } from '../../platform/db/list-query';
import { ownedRecords } from '../../platform/db/owned';
import { epochMs } from '../../platform/db/timestamps';

export interface FileFilter {
  scope: 'all' | 'owned' | 'shared';
  projectId?: string;
  parentId?: string;
  kind?: string;
  status?: string;
  conversationId?: string;
}

/** The file if `userId` owns it or it was shared with them. */
export function findReadableFile(db: Database, userId: string, id: string) {
  return db
    .selectFrom('files')
    .selectAll()
    .where('id', '=', id)
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), sharedWith(userId)]))
    .executeTakeFirst();
}

/** The file (of the outer query) is shared with `userId`: an access grant to them or a group of theirs. */
function sharedWith(userId: string) {
  return fileShared(userId, sql.ref('files.id'), sql.ref('files.project_id'));
}

/** A file's 1.0.0 shares: the read grants its owner gave to users (not groups). */
const userShares = (fileId: RawBuilder<unknown> | string) =>
  sql`from access_grants ag where ag.resource_kind = 'file' and ag.resource_id = ${fileId} and ag.principal_kind = 'user'`;

export const { find: findOwnedFile, update: updateFile, remove: deleteFile } = ownedRecords('files');

/** What a file is presented with: the list reads only these (not its storage key), and its times as epoch milliseconds. */
const FILE_FIELDS = [
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

/**
 * The files a user owns or was shared (per `scope`), filtered; read a page at a time. Each row
 * carries the users its file is shared with when `userId` owns it (empty otherwise), read in the
 * same statement rather than a second one per page. Owned and shared files are two parts of the
 * list, each read from its own index.
 */
export const readableFileList = listQuery({
  id: 'id',
  rows: (
    db,
    {
      userId,
      scope,
      shared = [],
      projectId,
      parentId,
      kind,
      status,
      conversationId,
    }: FileFilter & { userId: string; shared?: SharedProject[] },
  ) => {
    let query = db
      .selectFrom('files')
      .select([...FILE_FIELDS, epochMs('created_at'), epochMs('updated_at')])
      .select(
        sql<string[]>`coalesce((select array_agg(ag.principal_id order by ag.principal_id) ${userShares(sql.ref('files.id'))}
                                  and files.owner_user_id = ${userId}), '{}')`.as('shared_with'),
      );
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    if (parentId !== undefined) query = query.where('parent_id', '=', parentId);
    // Closed sets (the document's enums), written into the statement as ownedList does.
    if (kind !== undefined) query = query.where('kind', '=', sql.lit(kind));
    if (status !== undefined) query = query.where('status', '=', sql.lit(status));
    if (conversationId !== undefined) query = query.where('conversation_id', '=', conversationId);
    const owned = query.where('owner_user_id', '=', userId);
    // Shared: in a shared project (one part per project: its owner's files in it, from the
    // (project, owner, id) index), or else granted itself (a semi-join on the grants); disjoint parts.
    const others = query.where('owner_user_id', '<>', userId);
    const viaProjects = shared
      .filter((project) => projectId === undefined || project.id === projectId)
      .map((project) => query.where('project_id', '=', project.id).where('owner_user_id', '=', project.ownerUserId));
    let direct = others.where(sql<boolean>`files.id in (${grantedIds(userId, 'file')})`);
    if (shared.length > 0) {
      const ids = shared.map((project) => project.id);
      direct = direct.where((eb) => eb.or([eb('project_id', 'is', null), eb('project_id', 'not in', ids)]));
    }
    return scope === 'owned' ? owned : scope === 'shared' ? [direct, ...viaProjects] : [owned, direct, ...viaProjects];
  },
});
export type FileView = ListedRecord<'files', typeof readableFileList>;

export function insertFile(db: Database, row: Insertable<Files>) {
  return db.insertInto('files').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Whether the user owns a file (not a folder) whose content is stored. */
export async function ownsStoredFile(db: Database, ownerUserId: string): Promise<boolean> {
  const row = await db
    .selectFrom('files')
    .select('id')
    .where('owner_user_id', '=', ownerUserId)
    .where('kind', '=', 'file')
    .where('status', '=', 'ready')
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export async function hasChildren(db: Database, id: string): Promise<boolean> {
  return (await db.selectFrom('files').select('id').where('parent_id', '=', id).limit(1).executeTakeFirst()) !== undefined;
}

/** The users a file is shared with, in order (as the list's `shared_with`). */
export async function granteesOf(db: Database, fileId: string): Promise<string[]> {
  const { rows } = await sql<{ principal_id: string }>`select ag.principal_id ${userShares(fileId)} order by ag.principal_id`.execute(db);
  return rows.map((row) => row.principal_id);
}

/** Read grants of the owner's file to users; a user who has one already keeps it as it is. */
export async function addShares(db: Database, fileId: string, ownerUserId: string, userIds: string[]): Promise<void> {
  if (userIds.length === 0) return;
  const now = new Date();
  await db
    .insertInto('access_grants')
    .values(
      userIds.map((grantee) => ({
        id: uuidv7(now.getTime()),
        resource_kind: 'file',
        resource_id: fileId,
        principal_kind: 'user',
        principal_id: grantee,
        permission: 'read',
        granted_by: ownerUserId,
        created_at: now,
        updated_at: now,
      })),
    )
    .onConflict((oc) => oc.columns(['resource_kind', 'resource_id', 'principal_kind', 'principal_id']).doNothing())
    .execute();
}

export async function removeShares(db: Database, fileId: string, userIds: string[]): Promise<void> {
  if (userIds.length === 0) return;
  await db
    .deleteFrom('access_grants')
    .where('resource_kind', '=', 'file')
    .where('resource_id', '=', fileId)
    .where('principal_kind', '=', 'user')
    .where('principal_id', 'in', userIds)
    .execute();
}

export async function insertUploadToken(db: Database, row: { jti: string; fileId: string; userId: string; expiresAt: Date }) {
  await db
    .insertInto('upload_tokens')
    .values({ jti: row.jti, file_id: row.fileId, user_id: row.userId, expires_at: row.expiresAt })
    .execute();
}

/** Marks the token used; false when it already was (or never existed). */
export async function consumeUploadToken(db: Database, jti: string): Promise<boolean> {
  const row = await db
    .updateTable('upload_tokens')
    .set({ used_at: new Date() })
    .where('jti', '=', jti)
    .where('used_at', 'is', null)
    .returning('jti')
    .executeTakeFirst();
  return row !== undefined;
}

/** Makes the uploaded object the file's content, unless another upload already did. */
export function markReady(db: Database, id: string, stored: { key: string; size: number; sha256: string }) {
  return db
    .updateTable('files')
    .set({ status: 'ready', storage_key: stored.key, size_bytes: stored.size, sha256: stored.sha256, updated_at: new Date() })
    .where('id', '=', id)
    .where('status', '<>', 'ready')
    .returningAll()
    .executeTakeFirst();
}

export async function setStatus(db: Database, id: string, status: string, unlessStatus = 'ready'): Promise<void> {
  await db.updateTable('files').set({ status, updated_at: new Date() }).where('id', '=', id).where('status', '<>', unlessStatus).execute();
}

export async function beginIngestion(db: Database, id: string): Promise<number> {
  const row = await db
    .updateTable('files')
    .set({ ingest_status: 'processing', ingest_progress: 0, ingest_error: null, updated_at: new Date() })
    .where('id', '=', id)
    .returning(sql<number>`chunk_generation + 1`.as('generation'))
    .executeTakeFirstOrThrow();
  return row.generation;
}

export async function setIngestProgress(db: Database, id: string, progress: number): Promise<void> {
  await db.updateTable('files').set({ ingest_progress: progress }).where('id', '=', id).execute();
}

export async function insertChunks(
  db: Database,
  rows: Array<{ fileId: string; generation: number; seq: number; start: number; end: number; content: string }>,
): Promise<void> {
  if (rows.length === 0) return;
  await db
    .insertInto('file_chunks')
    .values(
      rows.map((r) => ({
        file_id: r.fileId,
        generation: r.generation,
        seq: r.seq,
        start_offset: r.start,
        end_offset: r.end,
        content: r.content,
      })),
    )
    .execute();
}

/** Switches search to the chunks of `generation` and drops every other generation, in one transaction. */
export async function finishIngestion(db: Database, id: string, generation: number, chunkCount: number): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('files')
      .set({ ingest_status: 'ready', ingest_progress: 1, chunk_count: chunkCount, chunk_generation: generation, updated_at: new Date() })
      .where('id', '=', id)
      .execute();
    await trx.deleteFrom('file_chunks').where('file_id', '=', id).where('generation', '<>', generation).execute();
  });
}

export async function failIngestion(db: Database, id: string, generation: number, message: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('file_chunks').where('file_id', '=', id).where('generation', '=', generation).execute();
    await trx
      .updateTable('files')
      .set({ ingest_status: 'failed', ingest_error: message, updated_at: new Date() })
      .where('id', '=', id)
      .execute();
  });
}

export interface ChunkMatch {
  file_id: string;
  name: string;
  seq: number;
  start_offset: number;
  end_offset: number;
  score: number;
  snippet: string;
}

/** Ranked chunks (current generation only) of the files `userId` may read. */
export async function searchChunks(
  db: Database,
  userId: string,
  query: string,
  filter: { fileId?: string; projectId?: string },
  limit: number,
): Promise<ChunkMatch[]> {
  const result = await sql<ChunkMatch>`
    select c.file_id, f.name, c.seq, c.start_offset, c.end_offset,
           ts_rank_cd(c.tsv, q)::float8 as score,
           ts_headline('english', c.content, q,
             'StartSel=«, StopSel=», MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "') as snippet
    from file_chunks c
    join files f on f.id = c.file_id and f.chunk_generation = c.generation,
         websearch_to_tsquery('english', ${query}) q
    where c.tsv @@ q
      and (f.owner_user_id = ${userId}
           or ${fileShared(userId, sql.ref('f.id'), sql.ref('f.project_id'))})
      ${filter.fileId !== undefined ? sql`and f.id = ${filter.fileId}` : sql``}
      ${filter.projectId !== undefined ? sql`and f.project_id = ${filter.projectId}` : sql``}
    order by score desc, c.file_id, c.seq
    limit ${limit}`.execute(db);
  return result.rows;
}

/** The chunks of a file's current generation, in order: its extracted text, piece by piece. */
export function currentChunks(db: Database, fileId: string, generation: number) {
  return db
    .selectFrom('file_chunks')
    .select(['start_offset', 'content'])
    .where('file_id', '=', fileId)
    .where('generation', '=', generation)
    .orderBy('seq')
    .execute();
}
