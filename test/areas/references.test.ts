import { type TestUser, useHarness } from '../helpers/harness';

/**
 * Every body field of a create or update that names another record is checked: another user's
 * record and a missing one are `404 not_found` with `details` naming the field, and nothing is
 * stored or changed; the caller's own record is accepted.
 */
const ctx = useHarness('alice', 'bob');

type Body = Record<string, unknown>;
type Kind = 'project' | 'folder' | 'conversation' | 'skill';

/** One record of each referenced kind per user, and one of each referring area for the updates. */
interface Records {
  project: string;
  folder: string;
  conversation: string;
  skill: string;
  note: string;
  memory: string;
  file: string;
  automation: string;
  /** A project to move (the referenced `project` becomes its parent). */
  child: string;
}

const records = new Map<string, Records>();

async function post(user: TestUser, path: string, body: Body): Promise<Record<string, Record<string, string>>> {
  const res = await ctx.h.http().post(path).set(user.auth).send(body);
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function recordsOf(user: TestUser): Promise<Records> {
  return {
    project: (await post(user, '/api/v1/projects', { name: 'Referenced' })).project!.projectId!,
    folder: (await post(user, '/api/v1/files', { name: 'Folder', kind: 'folder' })).file!.fileId!,
    conversation: (await post(user, '/api/v1/conversations', { title: 'Referenced' })).conversation!.conversationId!,
    skill: (await post(user, '/api/v1/skills', { name: 'Referenced' })).skill!.skillId!,
    note: (await post(user, '/api/v1/notes', { title: 'Referring' })).note!.noteId!,
    memory: (await post(user, '/api/v1/memory', { kind: 'fact', content: 'Referring' })).memoryItem!.memoryId!,
    file: (await post(user, '/api/v1/files', { name: 'referring.txt', mimeType: 'text/plain', sizeBytes: 5 })).file!.fileId!,
    automation: (await post(user, '/api/v1/automations', { name: 'Referring', prompt: 'Summarize.' })).automation!.automationId!,
    child: (await post(user, '/api/v1/projects', { name: 'Referring' })).project!.projectId!,
  };
}

interface Reference {
  /** The operation and the field, e.g. `POST /api/v1/files conversationId`. */
  name: string;
  method: 'post' | 'patch';
  path: string;
  /** The field as `details[].path` names it, under `/body/`. */
  field: string;
  kind: Kind;
  /** A valid body whose reference is `id`; `mine` are the caller's records (for updates). */
  body: (id: string, mine: Records) => Body;
  /** The collection whose content must not change (the caller's records, or one conversation's messages). */
  state: (mine: Records) => { path: string; query: Record<string, string | number> };
}

const list = (path: string) => () => ({ path, query: { limit: 200 } });

const references: Reference[] = [
  {
    name: 'POST /api/v1/projects parentId',
    method: 'post',
    path: '/api/v1/projects',
    field: 'parentId',
    kind: 'project',
    body: (id) => ({ name: 'Child', parentId: id }),
    state: list('/api/v1/projects'),
  },
  {
    name: 'PATCH /api/v1/projects parentId',
    method: 'patch',
    path: '/api/v1/projects',
    field: 'parentId',
    kind: 'project',
    body: (id, mine) => ({ projectId: mine.child, parentId: id, name: 'Moved' }),
    state: list('/api/v1/projects'),
  },
  {
    name: 'POST /api/v1/notes projectId',
    method: 'post',
    path: '/api/v1/notes',
    field: 'projectId',
    kind: 'project',
    body: (id) => ({ title: 'New', projectId: id }),
    state: list('/api/v1/notes'),
  },
  {
    name: 'PATCH /api/v1/notes projectId',
    method: 'patch',
    path: '/api/v1/notes',
    field: 'projectId',
    kind: 'project',
    body: (id, mine) => ({ noteId: mine.note, projectId: id, title: 'Moved' }),
    state: list('/api/v1/notes'),
  },
  {
    name: 'POST /api/v1/memory projectId',
    method: 'post',
    path: '/api/v1/memory',
    field: 'projectId',
    kind: 'project',
    body: (id) => ({ kind: 'fact', content: 'New', projectId: id }),
    state: list('/api/v1/memory'),
  },
  {
    name: 'PATCH /api/v1/memory projectId',
    method: 'patch',
    path: '/api/v1/memory',
    field: 'projectId',
    kind: 'project',
    body: (id, mine) => ({ memoryId: mine.memory, projectId: id, content: 'Moved' }),
    state: list('/api/v1/memory'),
  },
  {
    name: 'POST /api/v1/skills projectId',
    method: 'post',
    path: '/api/v1/skills',
    field: 'projectId',
    kind: 'project',
    body: (id) => ({ name: 'New', projectId: id }),
    state: list('/api/v1/skills'),
  },
  {
    name: 'PATCH /api/v1/skills projectId',
    method: 'patch',
    path: '/api/v1/skills',
    field: 'projectId',
    kind: 'project',
    body: (id, mine) => ({ skillId: mine.skill, projectId: id, name: 'Moved' }),
    state: list('/api/v1/skills'),
  },
  {
    name: 'POST /api/v1/files projectId',
    method: 'post',
    path: '/api/v1/files',
    field: 'projectId',
    kind: 'project',
    body: (id) => ({ name: 'new.txt', mimeType: 'text/plain', sizeBytes: 3, projectId: id }),
    state: list('/api/v1/files'),
  },
  {
    name: 'POST /api/v1/files parentId',
    method: 'post',
    path: '/api/v1/files',
    field: 'parentId',
    kind: 'folder',
    body: (id) => ({ name: 'new.txt', mimeType: 'text/plain', sizeBytes: 3, parentId: id }),
    state: list('/api/v1/files'),
  },
  {
    name: 'POST /api/v1/files conversationId',
    method: 'post',
    path: '/api/v1/files',
    field: 'conversationId',
    kind: 'conversation',
    body: (id) => ({ name: 'new.txt', mimeType: 'text/plain', sizeBytes: 3, conversationId: id }),
    state: list('/api/v1/files'),
  },
  {
    name: 'PATCH /api/v1/files projectId',
    method: 'patch',
    path: '/api/v1/files',
    field: 'projectId',
    kind: 'project',
    body: (id, mine) => ({ fileId: mine.file, projectId: id, name: 'moved.txt' }),
    state: list('/api/v1/files'),
  },
  {
    name: 'PATCH /api/v1/files parentId',
    method: 'patch',
    path: '/api/v1/files',
    field: 'parentId',
    kind: 'folder',
    body: (id, mine) => ({ fileId: mine.file, parentId: id, name: 'moved.txt' }),
    state: list('/api/v1/files'),
  },
  {
    name: 'POST /api/v1/conversations projectId',
    method: 'post',
    path: '/api/v1/conversations',
    field: 'projectId',
    kind: 'project',
    body: (id) => ({ title: 'New', projectId: id }),
    state: list('/api/v1/conversations'),
  },
  {
    name: 'PATCH /api/v1/conversations projectId',
    method: 'patch',
    path: '/api/v1/conversations',
    field: 'projectId',
    kind: 'project',
    body: (id, mine) => ({ conversationId: mine.conversation, projectId: id, title: 'Moved' }),
    state: list('/api/v1/conversations'),
  },
  {
    name: 'POST /api/v1/conversations/agent-greeting agentId',
    method: 'post',
    path: '/api/v1/conversations/agent-greeting',
    field: 'agentId',
    kind: 'skill',
    body: (id, mine) => ({ conversationId: mine.conversation, agentId: id }),
    state: (mine) => ({ path: '/api/v1/conversations/messages', query: { conversationId: mine.conversation, limit: 200 } }),
  },
  {
    name: 'POST /api/v1/conversations/agent-greeting skillId',
    method: 'post',
    path: '/api/v1/conversations/agent-greeting',
    field: 'skillId',
    kind: 'skill',
    body: (id, mine) => ({ conversationId: mine.conversation, skillId: id }),
    state: (mine) => ({ path: '/api/v1/conversations/messages', query: { conversationId: mine.conversation, limit: 200 } }),
  },
  {
    name: 'POST /api/v1/automations projectId',
    method: 'post',
    path: '/api/v1/automations',
    field: 'projectId',
    kind: 'project',
    body: (id) => ({ name: 'New', prompt: 'Summarize.', projectId: id }),
    state: list('/api/v1/automations'),
  },
  {
    name: 'POST /api/v1/automations skillIds',
    method: 'post',
    path: '/api/v1/automations',
    field: 'skillIds/0',
    kind: 'skill',
    body: (id) => ({ name: 'New', prompt: 'Summarize.', skillIds: [id] }),
    state: list('/api/v1/automations'),
  },
  {
    name: 'PATCH /api/v1/automations projectId',
    method: 'patch',
    path: '/api/v1/automations',
    field: 'projectId',
    kind: 'project',
    body: (id, mine) => ({ automationId: mine.automation, projectId: id, name: 'Moved' }),
    state: list('/api/v1/automations'),
  },
  {
    name: 'PATCH /api/v1/automations skillIds',
    method: 'patch',
    path: '/api/v1/automations',
    field: 'skillIds/0',
    kind: 'skill',
    body: (id, mine) => ({ automationId: mine.automation, skillIds: [id], name: 'Moved' }),
    state: list('/api/v1/automations'),
  },
];

beforeAll(async () => {
  records.set('alice', await recordsOf(ctx.alice));
  records.set('bob', await recordsOf(ctx.bob));
});

const send = (ref: Reference, body: Body) => {
  const agent = ctx.h.http();
  return (ref.method === 'post' ? agent.post(ref.path) : agent.patch(ref.path)).set(ctx.alice.auth).send(body);
};

const stateOf = async (ref: Reference, mine: Records) => {
  const { path, query } = ref.state(mine);
  const res = await ctx.h.http().get(path).query(query).set(ctx.alice.auth);
  expect(res.status).toBe(200);
  return res.body;
};

describe.each(references)('$name', (ref) => {
  test.each([
    ['another user’s record', () => records.get('bob')![ref.kind]],
    ['a missing record', () => `missing-${ref.kind}-0000`],
  ])('%s is a 404 naming the field, and nothing is stored', async (_, idOf) => {
    const mine = records.get('alice')!;
    const before = await stateOf(ref, mine);
    const res = await send(ref, ref.body(idOf(), mine));
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({
      code: 'not_found',
      error: expect.any(String),
      details: [{ path: `/body/${ref.field}`, message: expect.any(String) }],
    });
    expect(await stateOf(ref, mine)).toEqual(before);
  });

  test('the caller’s own record is accepted', async () => {
    const mine = records.get('alice')!;
    const res = await send(ref, ref.body(mine[ref.kind], mine));
    expect(res.status).toBe(200);
  });
});
