import { describeCrudContract } from '../helpers/crud-contract';
import { type Harness, startHarness, type TestUser } from '../helpers/harness';

let h: Harness;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  h = await startHarness();
  alice = await h.newUser('alice');
  bob = await h.newUser('bob');
});
afterAll(() => h.close());

describe('skills', () => {
  test('names are unique per user, ignoring case', async () => {
    const first = await alice.api.POST('/api/v1/skills', { body: { name: 'Summarize', instructions: 'Five bullets.' } });
    expect(first.data!.skill).toMatchObject({ name: 'Summarize', enabled: true, description: '', projectId: null });
    const clash = await h.http().post('/api/v1/skills').set(alice.auth).send({ name: 'SUMMARIZE' });
    expect(clash.status).toBe(409);
    expect(clash.body.code).toBe('conflict');
    const other = await alice.api.POST('/api/v1/skills', { body: { name: 'Translate' } });
    const rename = await h.http().patch('/api/v1/skills').set(alice.auth).send({ skillId: other.data!.skill.skillId, name: 'summarize' });
    expect(rename.status).toBe(409);
    const unchanged = await h.http().get('/api/v1/skills').query({ skillId: other.data!.skill.skillId }).set(alice.auth);
    expect(unchanged.body.skill.name).toBe('Translate');
    expect((await bob.api.POST('/api/v1/skills', { body: { name: 'Summarize' } })).response.status).toBe(200);
  });

  test('filters by enabled state', async () => {
    const off = (await alice.api.POST('/api/v1/skills', { body: { name: 'Off skill', enabled: false } })).data!.skill;
    const res = await h.http().get('/api/v1/skills').query({ enabled: false }).set(alice.auth);
    expect(res.body.skills.map((s: { skillId: string }) => s.skillId)).toEqual([off.skillId]);
  });
});

describe('skills: the collection contract', () => {
  describeCrudContract(
    {
      path: '/api/v1/skills',
      idField: 'skillId',
      one: 'skill',
      many: 'skills',
      create: (n) => ({ name: `Skill ${n}`, description: 'does things' }),
      update: { description: 'changed', enabled: false },
      invalidCreates: [{}, { name: '' }, { name: 'x'.repeat(101) }, { name: 'ok', enabled: 'no' }, { name: 'ok', instructions: 'x'.repeat(20001) }],
      invalidUpdates: [{ name: ' ' }, { enabled: null }, { omitId: true }, { description: 'x'.repeat(1001) }],
    },
    () => h,
  );
});
