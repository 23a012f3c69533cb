import { normalizeMemoryContent } from '../../src/areas/memory/service';
import { describeCrudContract } from '../helpers/crud-contract';
import { useHarness } from '../helpers/harness';

const ctx = useHarness('alice', 'bob');

describe('memory', () => {
  test('normalization ignores case, width and runs of white space', () => {
    expect(normalizeMemoryContent('  Likes\tTEA \n a lot ')).toBe('likes tea a lot');
    expect(normalizeMemoryContent('ＴＥＡ')).toBe('tea');
  });

  test('a repeated fact returns the existing item and writes nothing', async () => {
    const first = await ctx.alice.api.POST('/api/v1/memory', {
      body: { kind: 'preference', content: 'Prefers TypeScript examples.', source: 'assistant', sourceRef: 'conv-1' },
    });
    expect(first.data).toMatchObject({ created: true, memoryItem: { source: 'assistant', sourceRef: 'conv-1' } });
    const again = await ctx.alice.api.POST('/api/v1/memory', { body: { kind: 'fact', content: '  prefers   typescript EXAMPLES. ' } });
    expect(again.data!.created).toBe(false);
    expect(again.data!.memoryItem).toEqual(first.data!.memoryItem);
    const list = await ctx.h.http().get('/api/v1/memory').set(ctx.alice.auth);
    const same = list.body.memoryItems.filter(
      (m: { content: string }) => normalizeMemoryContent(m.content) === 'prefers typescript examples.',
    );
    expect(same).toHaveLength(1);
    // Another user's equal fact is their own.
    const bobs = await ctx.bob.api.POST('/api/v1/memory', { body: { kind: 'fact', content: 'Prefers TypeScript examples.' } });
    expect(bobs.data!.created).toBe(true);
  });

  test('concurrent equal creates store one item', async () => {
    const results = await Promise.all(
      Array.from({ length: 6 }, () =>
        ctx.h.http().post('/api/v1/memory').set(ctx.alice.auth).send({ kind: 'fact', content: 'Lives in Lyon.' }),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(new Set(results.map((r) => r.body.memoryItem.memoryId)).size).toBe(1);
    expect(results.filter((r) => r.body.created)).toHaveLength(1);
  });

  test('editing content into another item’s content is a 409; provenance never changes', async () => {
    const a = (await ctx.alice.api.POST('/api/v1/memory', { body: { kind: 'fact', content: 'Has a cat.' } })).data!.memoryItem;
    const b = (await ctx.alice.api.POST('/api/v1/memory', { body: { kind: 'fact', content: 'Has a dog.', source: 'import' } })).data!
      .memoryItem;
    const clash = await ctx.h.http().patch('/api/v1/memory').set(ctx.alice.auth).send({ memoryId: b.memoryId, content: 'HAS A CAT.' });
    expect(clash.status).toBe(409);
    expect((await ctx.h.http().get('/api/v1/memory').query({ memoryId: b.memoryId }).set(ctx.alice.auth)).body.memoryItem).toEqual(b);
    const provenance = await ctx.h.http().patch('/api/v1/memory').set(ctx.alice.auth).send({ memoryId: a.memoryId, source: 'user' });
    expect(provenance.status).toBe(400);
    const filtered = await ctx.h.http().get('/api/v1/memory').query({ kind: 'fact', limit: 200 }).set(ctx.alice.auth);
    expect(filtered.body.memoryItems.every((m: { kind: string }) => m.kind === 'fact')).toBe(true);
  });
});

describe('memory: the collection contract', () => {
  describeCrudContract(
    {
      path: '/api/v1/memory',
      idField: 'memoryId',
      one: 'memoryItem',
      many: 'memoryItems',
      create: (n) => ({ kind: 'fact', content: `Fact number ${n} ${Math.random()}` }),
      update: { kind: 'preference', content: `Updated ${Math.random()}` },
      invalidCreates: [
        { kind: 'fact' },
        { content: 'no kind' },
        { kind: 'opinion', content: 'x' },
        { kind: 'fact', content: '   ' },
        { kind: 'fact', content: 'x', source: 'robot' },
      ],
      invalidUpdates: [{ kind: 'opinion' }, { content: '' }, { content: 'x'.repeat(4001) }, { omitId: true }],
    },
    () => ctx.h,
  );
});
