import OpenAI from 'openai';
import { sql } from 'kysely';
import { useHarness } from '../helpers/harness';

// The OpenAI-compatible API offline, on the built-in development model (no provider configured)
// and the built-in embedder, driven by the official `openai` client: chat whole and streamed, a
// tool call from a `/tool` line, the token limit and stop sequences, an image part, embeddings.
const ctx = useHarness('alice');
const client = () => new OpenAI({ baseURL: `${ctx.h.baseUrl}/v1`, apiKey: ctx.alice.token, maxRetries: 0 });

const TOOLS: OpenAI.Chat.Completions.ChatCompletionFunctionTool[] = [
  { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } },
];

/** A 1 × 1 PNG. */
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';

describe('the OpenAI-compatible API on the development model', () => {
  test('a personal access token with `chat` is an OpenAI API key; one without it is refused in OpenAI’s shape', async () => {
    const mint = async (scopes: string[]) => {
      const res = await ctx.h.http().post('/api/v1/access-tokens').set(ctx.alice.auth).send({ name: 'editor', scopes }).expect(200);
      return new OpenAI({ baseURL: `${ctx.h.baseUrl}/v1`, apiKey: res.body.token as string, maxRetries: 0 });
    };
    const chat = await mint(['chat']);
    const completion = await chat.chat.completions.create({ model: 'development', messages: [{ role: 'user', content: 'By token' }] });
    expect(completion.choices[0]?.message.content).toContain('By token');
    const reader = await mint(['read']);
    const refused = await reader.models.list().catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((refused as InstanceType<typeof OpenAI.PermissionDeniedError>).code).toBe('insufficient_scope');
  });

  test('lists the development model and the built-in embedder', async () => {
    expect((await client().models.list()).data).toEqual([
      { id: 'development', object: 'model', created: 0, owned_by: 'builtin-development' },
      { id: 'builtin-hashing', object: 'model', created: 0, owned_by: 'embeddings' },
    ]);
  });

  test('a whole completion quotes the user, free, recorded in the usage ledger', async () => {
    const completion = await client().chat.completions.create({
      model: 'development',
      messages: [{ role: 'user', content: 'Hello there' }],
    });
    expect(completion.choices[0]).toMatchObject({
      message: { role: 'assistant', content: 'Development model (no AI provider is configured). You wrote: Hello there' },
      finish_reason: 'stop',
    });
    expect(completion.usage).toEqual({ prompt_tokens: 2, completion_tokens: 11, total_tokens: 13 });
    const rows = await sql<{ kind: string; cost: number }>`
      select kind, cost_micro_cents::int as cost from usage_records where resource_id = ${completion.id}`.execute(
      ctx.h.runtime.database.db,
    );
    expect(rows.rows).toEqual([{ kind: 'openai.chat', cost: 0 }]);
  });

  test('a streamed tool call: one tool_calls delta with the whole call, then finish_reason tool_calls; tool_choice none calls nothing', async () => {
    const stream = await client().chat.completions.create({
      model: 'development',
      messages: [{ role: 'user', content: '/tool lookup {"q":"launch"}' }],
      tools: TOOLS,
      stream: true,
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta)).toEqual([
      { role: 'assistant', content: '' },
      { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"launch"}' } }] },
      {},
    ]);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');
    const none = await client().chat.completions.create({
      model: 'development',
      messages: [{ role: 'user', content: '/tool lookup {"q":"launch"}' }],
      tools: TOOLS,
      tool_choice: 'none',
    });
    expect(none.choices[0]!.finish_reason).toBe('stop');
    expect(none.choices[0]!.message.tool_calls).toBeUndefined();
    // The result sent back: the model answers from it.
    const answered = await client().chat.completions.create({
      model: 'development',
      messages: [
        { role: 'user', content: '/tool lookup {"q":"launch"}' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"launch"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'Monday' },
      ],
      tools: TOOLS,
    });
    expect(answered.choices[0]!.message.content).toBe('Development model (no AI provider is configured). The tool lookup returned: Monday');
  });

  test('max_tokens ends with finish_reason length; a stop sequence cuts the answer; an image is read', async () => {
    const short = await client().chat.completions.create({
      model: 'development',
      messages: [{ role: 'user', content: 'one two three' }],
      max_tokens: 3,
    });
    expect(short.choices[0]).toMatchObject({ message: { content: 'Development model (no' }, finish_reason: 'length' });
    expect(short.usage?.completion_tokens).toBe(3);
    const stopped = await client().chat.completions.create({
      model: 'development',
      messages: [{ role: 'user', content: 'alpha STOP beta' }],
      stop: 'STOP',
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stopped) {
      text += chunk.choices[0]?.delta.content ?? '';
      usage = chunk.usage ?? usage;
    }
    expect(text).toBe('Development model (no AI provider is configured). You wrote: alpha ');
    expect(usage).toMatchObject({ completion_tokens: 10 });
    const image = await client().chat.completions.create({
      model: 'development',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${PIXEL}` } },
          ],
        },
      ],
    });
    expect(image.choices[0]!.message.content).toMatch(/Images: image\.png \(image\/png, 68 bytes, 1 × 1\)/);
    // By URL, through the outbound guard: a loopback address is refused (this deployment allows none).
    const local = await ctx.h
      .http()
      .post('/v1/chat/completions')
      .set(ctx.alice.auth)
      .send({
        model: 'development',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://127.0.0.1:9/cat.png' } }] }],
      });
    expect(local.status).toBe(400);
    expect(local.body.error).toMatchObject({ param: 'messages[0].content[0].image_url.url', code: 'invalid_request' });
    expect(local.body.error.message).toMatch(/is not allowed: 127\.0\.0\.1 is a loopback address/);
  });

  test('embeddings from the built-in embedder, of any size asked', async () => {
    const result = await client().embeddings.create({ model: 'builtin-hashing', input: ['alpha beta', 'gamma'], dimensions: 32 });
    expect(result.data.map((d) => [d.index, d.embedding.length])).toEqual([
      [0, 32],
      [1, 32],
    ]);
    expect(result.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
  });
});
