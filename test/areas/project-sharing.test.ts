import type { Client } from '@modelcontextprotocol/sdk/client/index.js' with { 'resolution-mode': 'import' };
import { randomUUID } from 'node:crypto';
import { storeFile } from '../helpers/files';
import { type Harness, startHarness, type TestUser, userNamed } from '../helpers/harness';

// A project shared `read` (issue 59, acceptance 2): every read path shows its notes and files to the
// grantee, none shows them to anyone else, and ending the grant hides them all on the next request.
let h: Harness;
let owner: TestUser;
let reader: TestUser;
let outsider: TestUser;
let admin: TestUser;
const adminId = `root-${randomUUID()}`;
const clients: Client[] = [];
const ids = {} as { project: string; child: string; note: string; childNote: string; looseNote: string; file: string };
const WORD = `zephyrine${randomUUID().slice(0, 8)}`;

async function mcpClient(user: TestUser): Promise<Client> {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${h.baseUrl}/mcp`), { requestInit: { headers: user.auth } }));
  clients.push(client);
  return client;
}

beforeAll(async () => {
  h = await startHarness({ BOOTSTRAP_ADMIN_USER_IDS: adminId });
  owner = await h.newUser('owner');
  reader = await h.newUser('reader');
  outsider = await h.newUser('outsider');
  admin = await userNamed(h, adminId);
  const post = async (path: string, body: Record<string, unknown>) =>
    (await h.http().post(path).set(owner.auth).send(body).expect(200)).body;
  ids.project = (await post('/api/v1/projects', { name: 'Reef survey', description: 'Shared with the reader' })).project.projectId;
  ids.child = (await post('/api/v1/projects', { name: 'Private child', parentId: ids.project })).project.projectId;
  ids.note = (
    await post('/api/v1/notes', { title: 'Survey plan', content: `Dive sites and the ${WORD} transect.`, projectId: ids.project })
  ).note.noteId;
  ids.childNote = (await post('/api/v1/notes', { title: 'Child note', content: `The ${WORD} budget.`, projectId: ids.child })).note.noteId;
  ids.looseNote = (await post('/api/v1/notes', { title: 'Loose note', content: `A ${WORD} outside the project.` })).note.noteId;
  const file = await storeFile(h, owner, 'survey.md', 'text/markdown', Buffer.from(`# Survey\n\nThe ${WORD} transect runs north.`), {
    projectId: ids.project,
  });
  ids.file = file.fileId;
  await h.http().post('/api/v1/files/ingest-document').set(owner.auth).send({ fileId: ids.file }).expect(200);
});
afterAll(async () => {
  for (const client of clients) await client.close();
  await h.close();
});

const get = (user: TestUser, path: string, query: Record<string, unknown> = {}) => h.http().get(path).query(query).set(user.auth);
const idsOf = (rows: Array<Record<string, string>>, key: string): string[] => rows.map((row) => row[key] as string);

/** What `user` reaches of the owner's project through every read path, as one comparable record. */
async function reach(user: TestUser) {
  const projects = (await get(user, '/api/v1/projects', { limit: 200 }).expect(200)).body.projects;
  const notes = (await get(user, '/api/v1/notes', { limit: 200 }).expect(200)).body.notes;
  const inProject = (await get(user, '/api/v1/notes', { projectId: ids.project }).expect(200)).body.notes;
  const files = (await get(user, '/api/v1/files', { limit: 200 }).expect(200)).body.files;
  const filesInProject = (await get(user, '/api/v1/files', { projectId: ids.project }).expect(200)).body.files;
  const fileSearch = (await h.http().post('/api/v1/files/search-text').set(user.auth).send({ query: WORD }).expect(200)).body;
  const search = (await h.http().post('/api/v1/knowledge/search').set(user.auth).send({ query: WORD, limit: 50 }).expect(200)).body.results;
  const conversationId = (await h.http().post('/api/v1/conversations').set(user.auth).send({}).expect(200)).body.conversation
    .conversationId;
  const chat = await h
    .http()
    .post('/api/v1/conversations/messages')
    .set(user.auth)
    .send({ conversationId, content: `What is the ${WORD}?`, knowledge: true });
  expect(chat.status).toBe(200);
  const mine = (ids_: string[]) => ids_.filter((id) => [ids.note, ids.file, ids.child, ids.childNote, ids.looseNote].includes(id)).sort();
  const mcp = await mcpClient(user);
  const resources = (await mcp.listResources()).resources.map((r) => r.uri);
  const noteTool = (await mcp.callTool({ name: 'notes_read', arguments: { noteId: ids.note } })) as { isError?: boolean };
  const projectsTool = (await mcp.callTool({ name: 'projects_list', arguments: {} })) as { content: Array<{ text: string }> };
  return {
    project: (await get(user, '/api/v1/projects', { projectId: ids.project })).status,
    child: (await get(user, '/api/v1/projects', { projectId: ids.child })).status,
    listedProjects: idsOf(projects, 'projectId').filter((id: string) => id === ids.project || id === ids.child),
    note: (await get(user, '/api/v1/notes', { noteId: ids.note })).status,
    childNote: (await get(user, '/api/v1/notes', { noteId: ids.childNote })).status,
    looseNote: (await get(user, '/api/v1/notes', { noteId: ids.looseNote })).status,
    listedNotes: idsOf(notes, 'noteId').filter((id: string) => [ids.note, ids.childNote, ids.looseNote].includes(id)),
    notesInProject: idsOf(inProject, 'noteId'),
    file: (await get(user, '/api/v1/files', { fileId: ids.file })).status,
    content: (await get(user, `/api/v1/files/${ids.file}/content`)).status,
    listedFiles: idsOf(files, 'fileId').filter((id: string) => id === ids.file),
    filesInProject: idsOf(filesInProject, 'fileId'),
    fileSearch: JSON.stringify(fileSearch).includes(ids.file),
    // The project itself is a knowledge source too, found by meaning where vectors are on: never a leak.
    projectFound: [
      ...search.map((r: { id: string }) => r.id),
      ...chat.body.reply.citations.map((c: { sourceId: string }) => c.sourceId),
    ].includes(ids.project),
    knowledgeSearch: mine([...new Set<string>(search.map((r: { id: string }) => r.id))]),
    citations: mine([...new Set<string>(chat.body.reply.citations.map((c: { sourceId: string }) => c.sourceId))]),
    mcpResources: resources.filter((uri) => uri.includes(ids.note) || uri.includes(ids.file) || uri.includes(ids.looseNote)).sort(),
    mcpNoteTool: noteTool.isError !== true,
    mcpProjectsTool: JSON.stringify(projectsTool.content).includes(ids.project),
  };
}

const NOTHING = {
  project: 404,
  child: 404,
  listedProjects: [],
  note: 404,
  childNote: 404,
  looseNote: 404,
  listedNotes: [],
  notesInProject: [],
  file: 404,
  content: 404,
  listedFiles: [],
  filesInProject: [],
  fileSearch: false,
  projectFound: false,
  knowledgeSearch: [],
  citations: [],
  mcpResources: [],
  mcpNoteTool: false,
  mcpProjectsTool: false,
};

describe('a project shared read', () => {
  test('the grantee reaches the project, its notes and its files on every read path, and nothing else of the owner', async () => {
    expect(await reach(reader)).toEqual(NOTHING);
    const grant = (
      await h
        .http()
        .post('/api/v1/grants')
        .set(owner.auth)
        .send({ resourceKind: 'project', resourceId: ids.project, principalKind: 'user', principalId: reader.userId, permission: 'read' })
        .expect(200)
    ).body.grant;

    expect(await reach(reader)).toEqual({
      ...NOTHING,
      project: 200,
      listedProjects: [ids.project],
      note: 200,
      listedNotes: [ids.note],
      notesInProject: [ids.note],
      file: 200,
      content: 200,
      listedFiles: [ids.file],
      filesInProject: [ids.file],
      fileSearch: true,
      projectFound: expect.any(Boolean),
      knowledgeSearch: [ids.file, ids.note].sort(),
      citations: [ids.file, ids.note].sort(),
      mcpResources: [`workspace://files/${ids.file}`, `workspace://notes/${ids.note}`].sort(),
      mcpNoteTool: true,
      mcpProjectsTool: true,
    });
    expect(await reach(outsider)).toEqual(NOTHING);

    const read = (await get(reader, '/api/v1/projects', { projectId: ids.project }).expect(200)).body.project;
    expect(read).toMatchObject({ ownerUserId: owner.userId, access: 'shared' });
    expect((await get(owner, '/api/v1/projects', { projectId: ids.project }).expect(200)).body.project.access).toBe('owner');
    expect((await get(reader, '/api/v1/notes', { noteId: ids.note }).expect(200)).body.note).toMatchObject({ access: 'shared' });
    expect(idsOf((await get(reader, '/api/v1/projects', { scope: 'owned' }).expect(200)).body.projects, 'projectId')).not.toContain(
      ids.project,
    );
    expect(idsOf((await get(reader, '/api/v1/projects', { scope: 'shared' }).expect(200)).body.projects, 'projectId')).toEqual([
      ids.project,
    ]);
    expect(idsOf((await get(reader, '/api/v1/notes', { scope: 'shared' }).expect(200)).body.notes, 'noteId')).toEqual([ids.note]);

    // Read only: the grantee changes, deletes and shares nothing.
    for (const attempt of [
      h.http().patch('/api/v1/projects').set(reader.auth).send({ projectId: ids.project, name: 'Mine' }),
      h.http().delete('/api/v1/projects').query({ projectId: ids.project }).set(reader.auth),
      h.http().patch('/api/v1/notes').set(reader.auth).send({ noteId: ids.note, title: 'Mine' }),
      h.http().delete('/api/v1/notes').query({ noteId: ids.note }).set(reader.auth),
      h.http().post('/api/v1/notes').set(reader.auth).send({ title: 'In theirs', projectId: ids.project }),
      h.http().patch('/api/v1/files').set(reader.auth).send({ fileId: ids.file, name: 'mine.md' }),
    ]) {
      expect([403, 404]).toContain((await attempt).status);
    }
    const reshare = await h
      .http()
      .post('/api/v1/grants')
      .set(reader.auth)
      .send({ resourceKind: 'project', resourceId: ids.project, principalKind: 'user', principalId: outsider.userId, permission: 'read' });
    expect(reshare.status).toBe(403);
    expect((await get(owner, '/api/v1/notes', { noteId: ids.note }).expect(200)).body.note.title).toBe('Survey plan');
    expect((await get(owner, '/api/v1/projects', { projectId: ids.project }).expect(200)).body.project.name).toBe('Reef survey');

    // Ended: every path forgets them on the next request.
    await h.http().delete('/api/v1/grants').query({ grantId: grant.grantId }).set(owner.auth).expect(200);
    expect(await reach(reader)).toEqual(NOTHING);
  });

  test('shared with a group, the project follows the membership', async () => {
    const group = (
      await h
        .http()
        .post('/api/v1/admin/groups')
        .set(admin.auth)
        .send({ name: `Divers ${randomUUID()}` })
        .expect(200)
    ).body.group.groupId;
    const members = (body: Record<string, unknown>) =>
      h
        .http()
        .patch('/api/v1/admin/groups/members')
        .set(admin.auth)
        .send({ groupId: group, ...body })
        .expect(200);
    await members({ add: [owner.userId, reader.userId] });
    await h
      .http()
      .post('/api/v1/grants')
      .set(owner.auth)
      .send({ resourceKind: 'project', resourceId: ids.project, principalKind: 'group', principalId: group, permission: 'read' })
      .expect(200);
    expect((await get(reader, '/api/v1/notes', { noteId: ids.note })).status).toBe(200);
    expect((await get(reader, '/api/v1/files', { fileId: ids.file })).status).toBe(200);
    // The owner in the group still sees their own once.
    expect(
      idsOf((await get(owner, '/api/v1/projects', { limit: 200 }).expect(200)).body.projects, 'projectId').filter(
        (id: string) => id === ids.project,
      ),
    ).toEqual([ids.project]);
    await members({ remove: [reader.userId] });
    expect(await reach(reader)).toEqual(NOTHING);
  });
});
