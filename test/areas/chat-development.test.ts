import { textBody, useHarness } from '../helpers/harness';
import { parseEvents } from '../helpers/openai-server';

// No provider configured: the built-in development model answers.
const ctx = useHarness('alice');

describe('the built-in development provider', () => {
  test('is the one model when nothing is configured, named as such', async () => {
    const models = await ctx.h.http().get('/api/v1/models').set(ctx.alice.auth);
    expect(models.body.models.filter((m: { kinds: string[] }) => m.kinds.includes('chat'))).toEqual([
      expect.objectContaining({ modelId: 'development', providerId: 'builtin-development', default: true, inputCentsPerMillionTokens: 0 }),
    ]);
    expect(models.body.models[0].name).toMatch(/not an AI/);
    const providers = await ctx.h.http().get('/api/v1/model-providers').set(ctx.alice.auth);
    expect(providers.body.providers).toEqual([
      expect.objectContaining({ kind: 'builtin-development', baseUrl: null, models: ['development'] }),
    ]);
  });

  test('answers deterministically, whole or streamed, and the two agree', async () => {
    const created = await ctx.h.http().post('/api/v1/conversations').set(ctx.alice.auth).send({});
    const conversationId = created.body.conversation.conversationId;
    const whole = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Plan the week' });
    expect(whole.body.reply).toMatchObject({
      status: 'complete',
      model: 'development',
      content: 'Development model (no AI provider is configured). You wrote: Plan the week',
      usage: { inputTokens: expect.any(Number), outputTokens: 12, costCents: 0 },
    });
    const streamed = await ctx.h
      .http()
      .post('/api/v1/conversations/messages')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Plan the week', stream: true })
      .buffer(true)
      .parse(textBody);
    const events = parseEvents(streamed.body as string);
    const deltas = events
      .filter((e) => e.event === 'delta')
      .map((e) => e.data.text)
      .join('');
    expect(deltas).toBe(whole.body.reply.content);
    expect(events.at(-1)).toMatchObject({ event: 'done', data: { message: { content: whole.body.reply.content } } });
  });
});
