import { Readable } from 'node:stream';
import { binaryBody, useHarness } from '../helpers/harness';

const ctx = useHarness('alice', 'bob');
const png = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10, ...Array.from({ length: 200 }, (_, i) => i)]);

const createOutput = (ownerUserId: string, extra: Record<string, unknown> = {}) =>
  ctx.h.runtime.services.outputs.create({ ownerUserId, type: 'image', name: 'chart.png', mimeType: 'image/png', body: png, ...extra });

describe('outputs', () => {
  test('listed, read, streamed with ranges, and deleted by their owner only', async () => {
    const { alice, bob } = ctx;
    const output = await createOutput(alice.userId, { automationId: 'auto-1', conversationId: 'conv-1' });
    const text = await createOutput(alice.userId, {
      type: 'text',
      name: 'summary.md',
      mimeType: 'text/markdown',
      body: Buffer.from('# Summary'),
    });

    const list = await alice.api.GET('/api/v1/outputs', {});
    expect(list.data && 'outputs' in list.data && list.data.outputs.map((o) => o.outputId)).toEqual([text.id, output.id]);
    const images = await ctx.h.http().get('/api/v1/outputs').query({ type: 'image', automationId: 'auto-1' }).set(alice.auth);
    expect(images.body.outputs).toEqual([
      expect.objectContaining({
        outputId: output.id,
        type: 'image',
        sizeBytes: png.length,
        automationId: 'auto-1',
        conversationId: 'conv-1',
      }),
    ]);
    const one = await ctx.h.http().get('/api/v1/outputs').query({ outputId: output.id }).set(alice.auth);
    expect(one.body.output.sha256).toMatch(/^[0-9a-f]{64}$/);

    const content = await ctx.h.http().get(`/api/v1/outputs/${output.id}/content`).set(alice.auth).buffer(true).parse(binaryBody);
    expect(content.status).toBe(200);
    expect((content.body as Buffer).equals(png)).toBe(true);
    expect(content.headers).toMatchObject({ 'content-type': 'image/png', 'x-content-type-options': 'nosniff' });
    const part = await ctx.h
      .http()
      .get(`/api/v1/outputs/${output.id}/content`)
      .set(alice.auth)
      .set('Range', 'bytes=0-7')
      .buffer(true)
      .parse(binaryBody);
    expect(part.status).toBe(206);
    expect((part.body as Buffer).equals(png.subarray(0, 8))).toBe(true);

    for (const res of [
      await ctx.h.http().get('/api/v1/outputs').query({ outputId: output.id }).set(bob.auth),
      await ctx.h.http().get(`/api/v1/outputs/${output.id}/content`).set(bob.auth),
      await ctx.h.http().delete('/api/v1/outputs').query({ outputId: output.id }).set(bob.auth),
    ]) {
      expect(res.status).toBe(404);
    }
    expect((await ctx.h.http().get('/api/v1/outputs').set(bob.auth)).body.outputs).toEqual([]);

    const deleted = await ctx.h.http().delete('/api/v1/outputs').send({ outputId: output.id }).set(alice.auth);
    expect(deleted.body).toEqual({ outputId: output.id, deleted: true });
    expect((await ctx.h.http().get(`/api/v1/outputs/${output.id}/content`).set(alice.auth)).status).toBe(404);
    await expect(ctx.h.runtime.services.outputs.openObject(output.storage_key)).rejects.toThrow();
  });

  test('an active type is an attachment', async () => {
    const html = await createOutput(ctx.alice.userId, {
      type: 'document',
      name: 'page.html',
      mimeType: 'text/html',
      body: Buffer.from('<script>1</script>'),
    });
    const res = await ctx.h.http().get(`/api/v1/outputs/${html.id}/content`).set(ctx.alice.auth);
    expect(res.headers['content-disposition']).toMatch(/^attachment; filename="page.html"/);
  });

  test('a streamed output of the wrong size is not recorded', async () => {
    const before = (await ctx.h.http().get('/api/v1/outputs').query({ limit: 200 }).set(ctx.bob.auth)).body.outputs.length;
    await expect(createOutput(ctx.bob.userId, { body: Readable.from([png]), sizeBytes: png.length + 1 })).rejects.toThrow();
    expect((await ctx.h.http().get('/api/v1/outputs').query({ limit: 200 }).set(ctx.bob.auth)).body.outputs).toHaveLength(before);
  });

  test('bad input is a 400; no credentials a 401', async () => {
    for (const query of [{ type: 'hologram' }, { limit: 0 }, { cursor: '%%' }, { other: 1 }]) {
      expect((await ctx.h.http().get('/api/v1/outputs').query(query).set(ctx.alice.auth)).status).toBe(400);
    }
    expect((await ctx.h.http().delete('/api/v1/outputs').set(ctx.alice.auth)).status).toBe(400);
    expect((await ctx.h.http().get('/api/v1/outputs')).status).toBe(401);
    expect((await ctx.h.http().get('/api/v1/outputs/x/content')).status).toBe(401);
  });
});
