/**
 * The OpenAI-compatible API's overhead (acceptance 4 of issue 57): the time `POST
 * /v1/chat/completions` (`stream: true`) adds before the first token, against the local
 * OpenAI-format model server (test/helpers/openai-server.ts: a real streaming server answering at
 * once) called directly in the same run, beside chat's figure measured the same way in the same
 * run. The service runs as `make run` runs it (dist/src/server.js), on Postgres, with that server
 * as its deployment provider.
 *   - /v1: many sequential streamed completions, from sending the request to the first chunk with
 *     content; each followed at once by the very request the service made to the model, sent
 *     directly, to its first content chunk. p50 and p99 of each and of the paired differences.
 *   - chat: in the same loop, a streamed turn (`POST /api/v1/conversations/messages`, a new
 *     conversation each) to its first `delta`, and its model request sent directly.
 * Alone: `BENCH_ONLY=openai make bench` (BENCH_OPENAI_REQUESTS: how many of each, default 300;
 * BENCH_OPENAI_WARM_UP: how many run first, uncounted, default 300).
 */
import { type FakeRequestBody, startFakeModel } from '../test/helpers/openai-server';
import { percentile, serverCpu, spawnPinned, stop, waitReady } from './process';
import { direct, MODEL_CONTENT, timed } from './streams';

const REQUESTS = Number(process.env.BENCH_OPENAI_REQUESTS ?? '300');
/** Run first and not counted: the service's compiled code settles over a few hundred streamed calls. */
const WARM_UP = Number(process.env.BENCH_OPENAI_WARM_UP ?? '300');
const MODEL = 'bench-model';

/** Chat's first delta event. */
const CHAT_DELTA = /(^|\n)event: delta\n/;

/** p50 / p99, in milliseconds. */
const ms = (values: number[]) => `${percentile(values, 50).toFixed(2)} / ${percentile(values, 99).toFixed(2)}`;

export async function openAiBench(env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  const fake = await startFakeModel(() => ({ kind: 'reply', chunks: ['Hello', ' there', ', from', ' the', ' bench.'] }));
  const base = `http://127.0.0.1:${env.PORT}`;
  const service = spawnPinned(serverCpu, ['dist/src/server.js'], {
    ...env,
    MODEL_PROVIDER_BASE_URL: fake.baseUrl,
    MODEL_PROVIDER_MODELS: MODEL,
    KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
  });
  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  /** A streamed call through the service: its first token's time and the one model request it made. */
  const through = async (send: () => Promise<Response>, first: RegExp, done: RegExp) => {
    const before = fake.requests.length;
    const started = performance.now();
    const res = await send();
    const out = await timed(res, started, first);
    const requests = fake.requests.slice(before);
    if (res.status !== 200 || !done.test(out.text) || requests.length !== 1)
      throw new Error(`the service answered ${res.status} after ${requests.length} model requests: ${out.text.slice(0, 500)}`);
    return { firstMs: out.firstMs, request: (requests[0] as { body: FakeRequestBody }).body };
  };
  const completion = (i: number) =>
    through(
      () => post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: `Say hello, call ${i}.` }], stream: true }),
      MODEL_CONTENT,
      /data: \[DONE\]\n\n$/,
    );
  const turn = async (i: number) => {
    // Titled: an untitled one would ask the model for its title after the first turn.
    const created = await post('/api/v1/conversations', { title: 'Bench' });
    if (created.status !== 200) throw new Error(`creating a conversation answered ${created.status}: ${await created.text()}`);
    const { conversation } = (await created.json()) as { conversation: { conversationId: string } };
    return through(
      () =>
        post('/api/v1/conversations/messages', {
          conversationId: conversation.conversationId,
          content: `Say hello, turn ${i}.`,
          stream: true,
        }),
      CHAT_DELTA,
      /(^|\n)event: done\n/,
    );
  };

  try {
    await waitReady(`${base}/readyz`);
    const v1 = { service: [] as number[], direct: [] as number[], added: [] as number[] };
    const chat = { service: [] as number[], direct: [] as number[], added: [] as number[] };
    for (let i = 0; i < WARM_UP + REQUESTS; i += 1) {
      for (const [measure, into] of [
        [completion, v1],
        [turn, chat],
      ] as const) {
        const served = await measure(i);
        const straight = (await direct(fake, served.request)).firstMs;
        if (i < WARM_UP) continue;
        into.service.push(served.firstMs);
        into.direct.push(straight);
        into.added.push(served.firstMs - straight);
      }
    }
    return [
      [`/v1/chat/completions TTFT, streamed, ${REQUESTS} calls: p50 / p99 (ms)`, ms(v1.service)],
      ['/v1 TTFT, the same model requests sent directly: p50 / p99 (ms)', ms(v1.direct)],
      ['/v1 TTFT added by the service, paired differences: p50 / p99 (ms)', ms(v1.added)],
      [`chat TTFT in the same run, ${REQUESTS} streamed turns: p50 / p99 (ms)`, ms(chat.service)],
      ['chat TTFT added by the service in the same run, paired differences: p50 / p99 (ms)', ms(chat.added)],
    ];
  } finally {
    await stop(service);
    await fake.close();
  }
}
