/**
 * Chat's overhead (acceptance 5 of issue 30): the time to first token the service adds to the
 * model's, and the cost of one tool-call round trip, against the local OpenAI-format model server
 * (test/helpers/openai-server.ts: a real streaming server answering at once) called directly in
 * the same run. The service runs as `make run` runs it (dist/src/server.js), on Postgres, with
 * that server as its deployment provider.
 *   - TTFT: many sequential streamed turns (`POST /api/v1/conversations/messages`, `stream: true`,
 *     each in a new conversation), from sending the request to the first `delta` event; each
 *     followed at once by the very request the service made to the model, sent directly, from
 *     sending it to its first content chunk. p50 and p95 of each, and of the paired differences.
 *     The plain turns' ends (the service's `done`, the model's `[DONE]`) are compared the same way.
 *   - Tool round trip: turns whose model asks for one built-in `allow` tool (`projects_list`), then
 *     answers, from sending the request to the end of the stream; each followed by the service's
 *     two model requests replayed directly, one after the other, each read to its end. What the
 *     service adds there is a plain turn's overhead plus the round trip's (the tool run, the step
 *     stored and charged, the second prompt).
 * Alone: `BENCH_ONLY=chat make bench` (BENCH_CHAT_TURNS, BENCH_CHAT_TOOL_TURNS: how many of each;
 * BENCH_CHAT_WARM_UP: how many of each run first, uncounted).
 */
import { type FakeRequestBody, startFakeModel } from '../test/helpers/openai-server';
import { percentile, serverCpu, spawnPinned, stop, waitReady } from './process';
import { direct, timed } from './streams';

const TURNS = Number(process.env.BENCH_CHAT_TURNS ?? '300');
const TOOL_TURNS = Number(process.env.BENCH_CHAT_TOOL_TURNS ?? '100');
/**
 * Turns run first and not counted, of each kind: the service's compiled code settles over about
 * 200 streamed turns (before that, a turn's time to first token falls by almost half).
 */
const WARM_UP = Number(process.env.BENCH_CHAT_WARM_UP ?? '300');
const MODEL = 'bench-model';
const TOOL = 'projects_list';

/** The service's first delta event. */
const SERVICE_DELTA = /(^|\n)event: delta\n/;

const ms = (values: number[]) => `${percentile(values, 50).toFixed(2)} / ${percentile(values, 95).toFixed(2)}`;

export async function chatBench(env: Record<string, string>, token: string): Promise<Array<[string, string]>> {
  // Tool turns: the model calls the tool when offered it and not yet given its result, then answers.
  let callTool = false;
  const fake = await startFakeModel();
  fake.behaviour = (n) => {
    const body = fake.requests[n]?.body;
    const answered = body?.messages.some((m) => m.role === 'tool') ?? false;
    if (callTool && !answered && body?.tools?.some((t) => t.function.name === TOOL)) {
      return { kind: 'tool-calls', calls: [{ id: `call_${n}`, name: TOOL, arguments: '{}' }] };
    }
    return { kind: 'reply', chunks: ['Hello', ' there', ', from', ' the', ' bench.'] };
  };
  const base = `http://127.0.0.1:${env.PORT}`;
  const service = spawnPinned(serverCpu, ['dist/src/server.js'], {
    ...env,
    MODEL_PROVIDER_BASE_URL: fake.baseUrl,
    MODEL_PROVIDER_MODELS: MODEL,
    KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
  });
  const api = async (path: string, body: unknown) =>
    fetch(`${base}/api/v1${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  /** One streamed turn in a new conversation: TTFT and total, and the model requests it made. */
  const turn = async (content: string) => {
    // Titled: an untitled one would ask the model for its title after the first turn.
    const created = await api('/conversations', { title: 'Bench' });
    if (created.status !== 200) throw new Error(`creating a conversation answered ${created.status}: ${await created.text()}`);
    const { conversation } = (await created.json()) as { conversation: { conversationId: string } };
    const before = fake.requests.length;
    const started = performance.now();
    const res = await api('/conversations/messages', { conversationId: conversation.conversationId, content, stream: true });
    const out = await timed(res, started, SERVICE_DELTA);
    if (res.status !== 200 || !/(^|\n)event: done\n/.test(out.text))
      throw new Error(`the turn answered ${res.status}: ${out.text.slice(0, 500)}`);
    return { ...out, requests: fake.requests.slice(before).map((r) => r.body) };
  };

  try {
    await waitReady(`${base}/readyz`);
    const ttft = { service: [] as number[], direct: [] as number[], added: [] as number[] };
    const whole = { service: [] as number[], direct: [] as number[], added: [] as number[] };
    for (let i = 0; i < WARM_UP + TURNS; i += 1) {
      const served = await turn(`Say hello, turn ${i}.`);
      const [request] = served.requests;
      if (served.requests.length !== 1 || !request) throw new Error(`a plain turn made ${served.requests.length} model requests`);
      const straight = await direct(fake, request);
      if (i < WARM_UP) continue;
      ttft.service.push(served.firstMs);
      ttft.direct.push(straight.firstMs);
      ttft.added.push(served.firstMs - straight.firstMs);
      whole.service.push(served.endMs);
      whole.direct.push(straight.endMs);
      whole.added.push(served.endMs - straight.endMs);
    }

    callTool = true;
    const trip = { service: [] as number[], direct: [] as number[], added: [] as number[] };
    for (let i = 0; i < WARM_UP + TOOL_TURNS; i += 1) {
      const served = await turn(`List my projects, turn ${i}.`);
      if (served.requests.length !== 2 || !served.text.includes('event: tool-result'))
        throw new Error(`a tool turn made ${served.requests.length} model requests`);
      let straight = 0;
      for (const request of served.requests) straight += (await direct(fake, request as FakeRequestBody)).endMs;
      if (i < WARM_UP) continue;
      trip.service.push(served.endMs);
      trip.direct.push(straight);
      trip.added.push(served.endMs - straight);
    }
    return [
      [`chat TTFT, streamed turn through the service, ${TURNS} turns: p50 / p95 (ms)`, ms(ttft.service)],
      ['chat TTFT, the same model requests sent directly: p50 / p95 (ms)', ms(ttft.direct)],
      ['chat TTFT added by the service, paired differences: p50 / p95 (ms; goal p50 ≤ 5)', ms(ttft.added)],
      [
        'chat plain turn to its end: service / direct (p50, ms); added, paired: p50 / p95 (ms)',
        `${percentile(whole.service, 50).toFixed(2)} / ${percentile(whole.direct, 50).toFixed(2)}; ${ms(whole.added)}`,
      ],
      [`chat turn with one tool call (${TOOL}), ${TOOL_TURNS} turns, to its end: p50 / p95 (ms)`, ms(trip.service)],
      ['chat: its two model requests sent directly, one after the other: p50 / p95 (ms)', ms(trip.direct)],
      ['chat tool-call round trip added by the service, paired differences: p50 / p95 (ms)', ms(trip.added)],
    ];
  } finally {
    await stop(service);
    await fake.close();
  }
}
