import { describeCrudContract } from '../helpers/crud-contract';
import { useHarness } from '../helpers/harness';

const ctx = useHarness('alice', 'bob');

describe('skills', () => {
  test('names are unique per user, ignoring case', async () => {
    const first = await ctx.alice.api.POST('/api/v1/skills', { body: { name: 'Summarize', instructions: 'Five bullets.' } });
    expect(first.data!.skill).toMatchObject({ name: 'Summarize', enabled: true, description: '', projectId: null });
    const clash = await ctx.h.http().post('/api/v1/skills').set(ctx.alice.auth).send({ name: 'SUMMARIZE' });
    expect(clash.status).toBe(409);
    expect(clash.body.code).toBe('conflict');
    const other = await ctx.alice.api.POST('/api/v1/skills', { body: { name: 'Translate' } });
    const rename = await ctx.h
      .http()
      .patch('/api/v1/skills')
      .set(ctx.alice.auth)
      .send({ skillId: other.data!.skill.skillId, name: 'summarize' });
    expect(rename.status).toBe(409);
    const unchanged = await ctx.h.http().get('/api/v1/skills').query({ skillId: other.data!.skill.skillId }).set(ctx.alice.auth);
    expect(unchanged.body.skill.name).toBe('Translate');
    expect((await ctx.bob.api.POST('/api/v1/skills', { body: { name: 'Summarize' } })).response.status).toBe(200);
  });

  test('filters by enabled state', async () => {
    const off = (await ctx.alice.api.POST('/api/v1/skills', { body: { name: 'Off skill', enabled: false } })).data!.skill;
    const res = await ctx.h.http().get('/api/v1/skills').query({ enabled: false }).set(ctx.alice.auth);
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
      invalidCreates: [
        {},
        { name: '' },
        { name: 'x'.repeat(101) },
        { name: 'ok', enabled: 'no' },
        { name: 'ok', instructions: 'x'.repeat(20001) },
      ],
      invalidUpdates: [{ name: ' ' }, { enabled: null }, { omitId: true }, { description: 'x'.repeat(1001) }],
    },
    () => ctx.h,
  );
});
