import { type RawBuilder, sql } from 'kysely';
import type { Database } from '../../platform/db';
import { grantedIds, isGranted, type SharedProject } from '../../platform/db/access';
import { anyWord } from '../../platform/db/text-search';

export type SourceKind = 'file' | 'memory' | 'note' | 'project';

export interface Hit {
  kind: SourceKind;
  id: string;
  title: string;
  snippet: string;
  score: number;
  project_id: string | null;
  file_id: string | null;
  seq: number | null;
  start_offset: number | null;
  end_offset: number | null;
}

/** A narrower scope within what the caller may read (a skill's knowledge): records of these projects, and these files. */
export interface Within {
  projectIds: string[];
  fileIds: string[];
}

export interface Scope {
  userId: string;
  kinds: SourceKind[];
  projectId?: string;
  within?: Within | null;
  /** The projects shared with the caller (sharedProjects): their owners' notes, files and the projects themselves are readable. */
  shared?: SharedProject[];
}

/**
 * The records of the projects shared with the caller, as conditions on a source's alias: constant
 * arrays (a project's notes and files are its owner's), so that each probes its (project, owner) index.
 */
function sharedOf({ shared = [] }: Scope) {
  const ids = sql`${shared.map((project) => project.id)}::text[]`;
  const owners = sql`${[...new Set(shared.map((project) => project.ownerUserId))]}::text[]`;
  const inProjects = (alias: string) =>
    sql`(${sql.ref(`${alias}.owner_user_id`)} = any(${owners}) and ${sql.ref(`${alias}.project_id`)} = any(${ids}))`;
  return { any: shared.length > 0, ids, owners, note: inProjects('n'), file: inProjects('f'), project: sql`p.id = any(${ids})` };
}

const HEADLINE = 'StartSel=«, StopSel=», MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "';
const nothing = sql``;

/**
 * The conditions of `within` (none without it), added to each source's statement beside the
 * caller's own read rule: a record of one of its projects (`project`: the record's project
 * column), a file of one of its projects or named (`file`).
 */
function withinOf({ within }: Scope) {
  if (!within) return { project: (_column: RawBuilder<unknown>) => nothing, file: (_file: string) => nothing };
  const projects = sql`any(${within.projectIds}::text[])`;
  return {
    project: (column: RawBuilder<unknown>) => sql`and ${column} = ${projects}`,
    file: (file: string) =>
      sql`and (${sql.ref(`${file}.project_id`)} = ${projects} or ${sql.ref(`${file}.id`)} = any(${within.fileIds}::text[]))`,
  };
}

/**
 * One SELECT per source over the rows the caller may read: kind, id, title, the text to cut a
 * snippet from, project, file position, and `extra` (a match condition or a join).
 */
function branches(
  scope: Scope,
  parts: Record<SourceKind, { from: RawBuilder<unknown>; where: RawBuilder<unknown>; measure: RawBuilder<unknown> }>,
) {
  const { userId, projectId } = scope;
  const within = withinOf(scope);
  const shared = sharedOf(scope);
  const inProject = (column: RawBuilder<unknown>) =>
    sql`${projectId !== undefined ? sql`and ${column} = ${projectId}` : nothing} ${within.project(column)}`;
  const selects: Record<SourceKind, RawBuilder<unknown>> = {
    note: sql`select 'note', n.id, n.title, n.title || E'\n' || n.content, ${parts.note.measure},
                     n.project_id, null::text, null::int, null::int, null::int
              from notes n ${parts.note.from}
              where (n.owner_user_id = ${userId} or ${shared.note}) ${parts.note.where} ${inProject(sql`n.project_id`)}`,
    memory: sql`select 'memory', m.id, left(m.content, 80), m.content, ${parts.memory.measure},
                       m.project_id, null::text, null::int, null::int, null::int
                from memory_items m ${parts.memory.from}
                where m.owner_user_id = ${userId} ${parts.memory.where} ${inProject(sql`m.project_id`)}`,
    project: sql`select 'project', p.id, p.name, p.name || E'\n' || p.description || E'\n' || p.instructions, ${parts.project.measure},
                        p.id, null::text, null::int, null::int, null::int
                 from projects p ${parts.project.from}
                 where (p.owner_user_id = ${userId} or ${shared.project}) ${parts.project.where} ${inProject(sql`p.id`)}`,
    // A file shared with the caller is theirs to read, its owner's project is not: no projectId.
    file: sql`select 'file', f.id, f.name, c.content, ${parts.file.measure},
                     case when f.owner_user_id = ${userId} then f.project_id end, f.id, c.seq, c.start_offset, c.end_offset
              from file_chunks c join files f on f.id = c.file_id and f.chunk_generation = c.generation ${parts.file.from}
              where (f.owner_user_id = ${userId}
                     or ${isGranted(userId, 'file', sql.ref('f.id'))} or ${shared.file})
                ${parts.file.where} ${projectId !== undefined ? sql`and f.project_id = ${projectId}` : nothing} ${within.file('f')}`,
  };
  return sql.join(
    scope.kinds.map((kind) => selects[kind]),
    sql` union all `,
  );
}

/**
 * `cut`: a hit's snippet is cut around the query's words; `later`: the hit carries its whole text
 * in `snippet`, for `cutSnippets` to cut once the hits to return are known (fusion drops most).
 */
export type Snippets = 'cut' | 'later';

const snippetOf = (snippets: Snippets) =>
  snippets === 'cut' ? sql`ts_headline('english', body, (select q from query), ${HEADLINE})` : sql`body`;

/** The snippets of texts (hits' `later` snippets), cut as search results' are, in order. */
export async function cutSnippets(db: Database, query: string, texts: string[]): Promise<string[]> {
  if (texts.length === 0) return [];
  const { rows } = await sql<{ snippet: string }>`
    select ts_headline('english', t.body, ${anyWord(query)}, ${HEADLINE}) as snippet
    from unnest(${texts}::text[]) with ordinality as t(body, n) order by t.n`.execute(db);
  return rows.map((row) => row.snippet);
}

/** The distinct lexemes of a query as full-text search sees it (English stemming, stop words dropped). */
async function lexemesOf(db: Database, query: string): Promise<string[]> {
  const { rows } = await sql<{ lexeme: string }>`
    select distinct unnest(tsvector_to_array(to_tsvector('english', ${query}))) as lexeme order by 1`.execute(db);
  return rows.map((row) => row.lexeme);
}

/** More combinations than this and a tier is skipped (its matches fall to the next tier down). */
const MAX_TIER_TERMS = 64;

function combinations<T>(items: T[], k: number): T[][] {
  if (k === 0) return [[]];
  if (items.length < k) return [];
  const [first, ...rest] = items as [T, ...T[]];
  return [...combinations(rest, k - 1).map((tail) => [first, ...tail]), ...combinations(rest, k)];
}

const quoted = (lexeme: string) => `'${lexeme.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;

/**
 * The tiers of a query of n words, most words first: tier k matches the passages containing at
 * least k of them, as a tsquery (an OR of k-word ANDs; tiers with too many combinations are
 * left out, down to tier 1, any word).
 */
export function tiersOf(lexemes: string[]): Array<{ words: number; tsquery: string }> {
  const tiers: Array<{ words: number; tsquery: string }> = [];
  for (let k = lexemes.length; k >= 1; k -= 1) {
    const groups = combinations(lexemes, k);
    if (groups.length > MAX_TIER_TERMS && k > 1) continue;
    tiers.push({ words: k, tsquery: groups.map((group) => `(${group.map(quoted).join(' & ')})`).join(' | ') });
  }
  return tiers;
}

/**
 * How many matches of a tier each source ranks at most (the newest: ids are time-ordered), so that
 * a search's cost depends on the page, not on how many passages contain a common word.
 */
export const LEXICAL_CANDIDATES = 200;

/**
 * Full-text matches, best first, as the document describes: passages with more of the words first
 * (tiers, each found through the GIN indexes), then closer together (cover density). The tiers
 * are read from the most words down until `limit` hits are found. Within a tier each source ranks
 * only its `candidates` newest matches (at least `limit`): the planner reads them by an ordered
 * index scan that filters on the match for a common word, or from the GIN bitmap for a rare one,
 * and never fetches every matching row. A hit's score is its tier (words matched minus one) plus
 * its normalized rank within the tier (below 1). Ties go by kind, id, chunk (the same data gives
 * the same order); snippets are cut only for the rows returned.
 */
export async function lexicalHits(
  db: Database,
  scope: Scope,
  query: string,
  limit: number,
  snippets: Snippets = 'cut',
  candidates = LEXICAL_CANDIDATES,
): Promise<Hit[]> {
  const hits: Hit[] = [];
  let above: string | null = null;
  const files = scope.kinds.includes('file') ? await readableFiles(db, scope) : [];
  for (const tier of tiersOf(await lexemesOf(db, query))) {
    const bound = Math.max(candidates, limit - hits.length);
    hits.push(...(await tierHits(db, scope, files, query, tier, above, limit - hits.length, bound, snippets)));
    if (hits.length >= limit) break;
    above = tier.tsquery;
  }
  return hits;
}

/** The ids of the files the caller may read in the scope: their own and (without a project) those shared with them. */
async function readableFiles(db: Database, scope: Scope): Promise<string[]> {
  const { userId, projectId } = scope;
  const inScope = withinOf(scope).file('f');
  const inProject = projectId !== undefined ? sql`and f.project_id = ${projectId}` : nothing;
  const own = sql`select f.id from files f where f.owner_user_id = ${userId} ${inScope} ${inProject}`;
  // The files of the projects shared with the caller (in the project asked, if one is).
  const shared = sharedOf(scope);
  const inShared = shared.any ? sql` union select f.id from files f where ${shared.file} ${inScope} ${inProject}` : nothing;
  const query =
    projectId !== undefined
      ? sql<{ id: string }>`${own} ${inShared}`
      : sql<{ id: string }>`${own} union select f.id from files f where f.id in (${grantedIds(userId, 'file')}) ${inScope} ${inShared}`;
  const { rows } = await query.execute(db);
  return rows.map((row) => row.id);
}

/**
 * The best `limit` passages of one tier that no tier above has (`above`: that tier's tsquery),
 * ranked among each source's `bound` newest matches. The tsqueries are parameters (not read from
 * a CTE), so that the planner sees how common their words are.
 */
async function tierHits(
  db: Database,
  scope: Scope,
  files: string[],
  query: string,
  tier: { words: number; tsquery: string },
  above: string | null,
  limit: number,
  bound: number,
  snippets: Snippets,
): Promise<Hit[]> {
  const { userId, projectId } = scope;
  const within = withinOf(scope);
  const matches = (tsv: RawBuilder<unknown>) =>
    sql`${tsv} @@ ${tier.tsquery}::tsquery ${above === null ? nothing : sql`and not ${tsv} @@ ${above}::tsquery`}`;
  const inProject = (column: RawBuilder<unknown>) => (projectId !== undefined ? sql`and ${column} = ${projectId}` : nothing);
  const measure = (tsv: RawBuilder<unknown>) => sql`${tier.words - 1} + ts_rank_cd(${tsv}, (select q from query), 32)`;
  const shared = sharedOf(scope);
  // The newest matches of one owner's table: by its (owner_user_id, id) index backwards, or the GIN
  // bitmap; and for notes and projects, beside them the newest matches in the projects shared with the caller.
  const one = (table: string, alias: string, whose: RawBuilder<unknown>) =>
    sql`(select * from ${sql.table(table)} ${sql.raw(alias)}
         where ${whose} and ${matches(sql.ref(`${alias}.tsv`))}
           ${inProject(sql.ref(alias === 'p' ? 'p.id' : `${alias}.project_id`))}
           ${within.project(sql.ref(alias === 'p' ? 'p.id' : `${alias}.project_id`))}
         order by ${sql.ref(`${alias}.id`)} desc limit ${bound})`;
  const newest = (table: string, alias: string) => {
    const own = one(table, alias, sql`${sql.ref(`${alias}.owner_user_id`)} = ${userId}`);
    const others = alias === 'n' ? shared.note : alias === 'p' ? shared.project : null;
    if (!shared.any || others === null) return sql`${own} ${sql.raw(alias)}`;
    return sql`(${own} union all ${one(table, alias, others)}) ${sql.raw(alias)}`;
  };
  const selects: Record<SourceKind, RawBuilder<unknown>> = {
    note: sql`select 'note', n.id, n.title, n.title || E'\n' || n.content, ${measure(sql`n.tsv`)},
                     n.project_id, null::text, null::int, null::int, null::int
              from ${newest('notes', 'n')}`,
    memory: sql`select 'memory', m.id, left(m.content, 80), m.content, ${measure(sql`m.tsv`)},
                       m.project_id, null::text, null::int, null::int, null::int
                from ${newest('memory_items', 'm')}`,
    project: sql`select 'project', p.id, p.name, p.name || E'\n' || p.description || E'\n' || p.instructions, ${measure(sql`p.tsv`)},
                        p.id, null::text, null::int, null::int, null::int
                 from ${newest('projects', 'p')}`,
    // The chunks of the files the caller may read, as a list of ids (a parameter, whose size the
    // planner sees): a filter, so that the chunks' primary key backwards (file ids are
    // time-ordered) or the GIN bitmap is the way in, never one index probe per file. Only the
    // file's current generation counts, inside the bound: the chunks of an ingestion in progress
    // (a newer generation, committed batch by batch) must not take the bound's places.
    file: sql`select 'file', f.id, f.name, c.content, ${measure(sql`c.tsv`)},
                     case when f.owner_user_id = ${userId} then f.project_id end, f.id, c.seq, c.start_offset, c.end_offset
              from (select * from file_chunks c where ${matches(sql`c.tsv`)} and c.file_id = any(${files}::text[])
                      and exists (select 1 from files g where g.id = c.file_id and g.chunk_generation = c.generation)
                    order by c.file_id desc, c.generation desc, c.seq desc limit ${bound}) c
              join files f on f.id = c.file_id and f.chunk_generation = c.generation`,
  };
  const result = await sql<Hit>`
    with query as (select ${anyWord(query)} as q),
    hits (kind, id, title, body, measure, project_id, file_id, seq, start_offset, end_offset) as (${sql.join(
      scope.kinds.map((kind) => selects[kind]),
      sql` union all `,
    )})
    select kind, id, title, ${snippetOf(snippets)} as snippet,
           measure::float8 as score, project_id, file_id, seq, start_offset, end_offset
    from (select * from hits order by measure desc, kind, id, seq nulls first limit ${limit}) top
    order by measure desc, kind, id, seq nulls first`.execute(db);
  return result.rows;
}

/**
 * The nearest embeddings (cosine distance) made by `model` of what the caller may read, their
 * sources, best first: their own rows and those of the files shared with them (a file's
 * embeddings are its owner's). Only rows of that model and the query's size are compared. The
 * filter is applied inside the HNSW scan: with pgvector 0.8 or later the scan goes on
 * (`hnsw.iterative_scan`) until enough rows pass it to fill the page, however few of the index's
 * rows are the caller's; before 0.8 it looks at the most candidates the index allows (`hnsw.ef_search`).
 */
export async function vectorHits(
  db: Database,
  scope: Scope,
  query: string,
  embedding: { model: string; vector: string; dimensions: number },
  limit: number,
  snippets: Snippets = 'cut',
): Promise<Hit[]> {
  // The cast to the fixed size is the expression the HNSW index of 256-dimension rows is built on.
  // Written as literals, so that the planner matches the index's predicate (a whole number: safe).
  const dims = sql.raw(String(Math.trunc(embedding.dimensions)));
  const typed = sql`vector(${dims})`;
  const distance = sql`embedding::${typed} <=> ${embedding.vector}::${typed}`;
  const q = anyWord(query);
  const near = (kind: SourceKind, on: RawBuilder<unknown>) => ({
    from: sql`join nearest e on e.source_kind = ${kind} and ${on}`,
    where: nothing,
    measure: sql`e.distance`,
  });
  // The caller's own rows, and the shared files' rows of their owners: two scans that each keep to
  // the owner and model (the HNSW index's filter, or the (owner, model) index of an exact search).
  const shares = sql`from files f where f.id in (${grantedIds(scope.userId, 'file')})`;
  // The shared projects' rows: their owners', of the project, its notes and its files (the branches below check each again).
  const shared = sharedOf(scope);
  const inShared = shared.any
    ? sql`or (source_kind = 'project' and source_id = any(${shared.ids}))
          or (source_kind = 'note' and source_id = any(array(select n.id from notes n where ${shared.note})))
          or (source_kind = 'file' and split_part(source_id, ':', 1) = any(array(select f.id from files f where ${shared.file})))`
    : nothing;
  const candidates = (owners: RawBuilder<unknown>, extra: RawBuilder<unknown>) =>
    sql`(select source_kind, source_id, ${distance} as distance from knowledge_embeddings
         where owner_user_id = ${owners} and embedding_model = ${embedding.model} and vector_dims(embedding) = ${dims} ${extra}
         order by ${distance} limit ${limit * 4})`;
  const statement = sql<Hit>`
    with query as (select ${q} as q),
    nearest as materialized (
      select source_kind, source_id, distance,
             -- file chunk ids are "<fileId>:<generation>:<seq>": split, they join on the chunks' key
             case when source_kind = 'file' then split_part(source_id, ':', 1) end as chunk_file_id,
             case when source_kind = 'file' then split_part(source_id, ':', 2)::int end as chunk_generation,
             case when source_kind = 'file' then split_part(source_id, ':', 3)::int end as chunk_seq
      from (${candidates(sql`${scope.userId}`, nothing)}
            union all
            ${candidates(
              sql`any(array(select f.owner_user_id ${shares}) || ${shared.owners})`,
              // Uncorrelated, the exists is a one-time filter: without shares the second scan never starts.
              sql`and ((source_kind = 'file' and split_part(source_id, ':', 1) = any(array(select f.id ${shares}))) ${inShared})
                  and (exists (select 1 ${shares}) or ${shared.any})`,
            )}) mine
      order by distance
      limit ${limit * 4}
    ),
    hits (kind, id, title, body, measure, project_id, file_id, seq, start_offset, end_offset) as (${branches(scope, {
      note: near('note', sql`e.source_id = n.id`),
      memory: near('memory', sql`e.source_id = m.id`),
      project: near('project', sql`e.source_id = p.id`),
      file: near('file', sql`e.chunk_file_id = c.file_id and e.chunk_generation = c.generation and e.chunk_seq = c.seq`),
    })})
    select kind, id, title, ${snippetOf(snippets)} as snippet,
           (1 - measure)::float8 as score, project_id, file_id, seq, start_offset, end_offset
    from (select * from hits order by measure asc, kind, id, seq nulls first limit ${limit}) top
    order by measure asc, kind, id, seq nulls first`;
  // Settings for this transaction only: the relaxed order is sorted again by distance above.
  return db.transaction().execute(async (trx) => {
    await sql`
      select case when string_to_array(extversion, '.')::int[] >= array[0, 8]
                  then set_config('hnsw.iterative_scan', 'relaxed_order', true)
                  else set_config('hnsw.ef_search', '1000', true) end
      from pg_extension where extname = 'vector'`.execute(trx);
    return (await statement.execute(trx)).rows;
  });
}

export interface PendingSource {
  kind: SourceKind;
  id: string;
  owner: string;
  version: string;
  text: string;
  /** The embedder the owner's records are due from: the deployment's, or `connection:<modelId>`. */
  model: string;
  /**
   * What a failure of that embedder is remembered by: the model name, and for a connection's also
   * when the connection last changed (a new key or address is tried at once).
   */
  attempt: string;
}

/**
 * Records whose embedding is missing, older than the record or made by another embedder than the
 * one due for their owner (the deployment's `model`, or the owner's chosen connection model while
 * that connection exists), a batch at a time, leaving out the embedders in `skip` (by `attempt`).
 */
export async function pendingSources(db: Database, model: string, skip: string[], limit: number): Promise<PendingSource[]> {
  // One row per user who chose a connection's model that still exists; everyone else: `model`.
  const due = (owner: RawBuilder<unknown>) => sql`left join chosen u on u.user_id = ${owner}`;
  const wanted = sql`coalesce(u.model, ${model})`;
  const attempt = sql`coalesce(u.attempt, ${model})`;
  const result = await sql<PendingSource>`
    with chosen as (
      select s.user_id, 'connection:' || s.default_embeddings_model as model,
             'connection:' || s.default_embeddings_model || '@' || (extract(epoch from c.updated_at) * 1000)::bigint::text as attempt
      from user_settings s
      join model_connections c on c.id = split_part(s.default_embeddings_model, '/', 1) and c.owner_user_id = s.user_id
      where s.default_embeddings_model is not null
    )
    select * from (
      select 'note' as kind, n.id, n.owner_user_id as owner, (extract(epoch from n.updated_at) * 1000)::bigint::text as version,
             left(n.title || E'\n' || n.content, 4000) as text, ${wanted} as model, ${attempt} as attempt
      from notes n left join knowledge_embeddings e on e.source_kind = 'note' and e.source_id = n.id ${due(sql`n.owner_user_id`)}
      where (e.source_id is null or e.source_version <> (extract(epoch from n.updated_at) * 1000)::bigint::text or e.embedding_model <> ${wanted})
        and ${attempt} <> all(${skip}::text[])
      union all
      select 'memory', m.id, m.owner_user_id, (extract(epoch from m.updated_at) * 1000)::bigint::text, m.content, ${wanted}, ${attempt}
      from memory_items m left join knowledge_embeddings e on e.source_kind = 'memory' and e.source_id = m.id ${due(sql`m.owner_user_id`)}
      where (e.source_id is null or e.source_version <> (extract(epoch from m.updated_at) * 1000)::bigint::text or e.embedding_model <> ${wanted})
        and ${attempt} <> all(${skip}::text[])
      union all
      select 'project', p.id, p.owner_user_id, (extract(epoch from p.updated_at) * 1000)::bigint::text,
             left(p.name || E'\n' || p.description || E'\n' || p.instructions, 4000), ${wanted}, ${attempt}
      from projects p left join knowledge_embeddings e on e.source_kind = 'project' and e.source_id = p.id ${due(sql`p.owner_user_id`)}
      where (e.source_id is null or e.source_version <> (extract(epoch from p.updated_at) * 1000)::bigint::text or e.embedding_model <> ${wanted})
        and ${attempt} <> all(${skip}::text[])
      union all
      select 'file', c.file_id || ':' || c.generation || ':' || c.seq, f.owner_user_id, 'chunk', c.content, ${wanted}, ${attempt}
      from file_chunks c join files f on f.id = c.file_id and f.chunk_generation = c.generation
      left join knowledge_embeddings e on e.source_kind = 'file' and e.source_id = c.file_id || ':' || c.generation || ':' || c.seq
      ${due(sql`f.owner_user_id`)}
      where (e.source_id is null or e.embedding_model <> ${wanted})
        and ${attempt} <> all(${skip}::text[])
    ) pending
    limit ${limit}`.execute(db);
  return result.rows;
}

export async function upsertEmbeddings(
  db: Database,
  model: string,
  rows: Array<Omit<PendingSource, 'model' | 'attempt'> & { vector: string }>,
): Promise<void> {
  if (rows.length === 0) return;
  const values = sql.join(rows.map((r) => sql`(${r.kind}, ${r.id}, ${r.owner}, ${r.version}, ${r.vector}::vector, ${model})`));
  await sql`
    insert into knowledge_embeddings (source_kind, source_id, owner_user_id, source_version, embedding, embedding_model)
    values ${values}
    on conflict (source_kind, source_id) do update
      set owner_user_id = excluded.owner_user_id, source_version = excluded.source_version,
          embedding = excluded.embedding, embedding_model = excluded.embedding_model, created_at = now()`.execute(db);
}

/** Drops embeddings whose record is gone (deleted, or a file chunk of a replaced ingestion). */
export async function deleteOrphanEmbeddings(db: Database): Promise<number> {
  const result = await sql`
    delete from knowledge_embeddings e
    where (e.source_kind = 'note' and not exists (select 1 from notes n where n.id = e.source_id))
       or (e.source_kind = 'memory' and not exists (select 1 from memory_items m where m.id = e.source_id))
       or (e.source_kind = 'project' and not exists (select 1 from projects p where p.id = e.source_id))
       or (e.source_kind = 'file' and not exists (
             select 1 from file_chunks c join files f on f.id = c.file_id and f.chunk_generation = c.generation
             where c.file_id || ':' || c.generation || ':' || c.seq = e.source_id))`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
