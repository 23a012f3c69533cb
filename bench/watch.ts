/**
 * A resumed watcher's lag (issue 56, acceptance 4): two instances of the service on one Postgres,
 * a reply streamed by instance A to its client while a second client follows it through instance B
 * (`GET /api/v1/conversations/messages/stream?messageId=`, attached once the reply has begun, so
 * that it replays the stored events and then follows live ones). For each event after the pause
 * in the model's stream, the lag is when B's watcher received it minus when A's client did, both
 * read by this process on one clock. Alone: `BENCH_ONLY=watch make bench` (BENCH_WATCH_TURNS).
 */
import { type FakeModelServer, startFakeModel } from '../test/helpers/openai-server';
import { percentile, serverCpu, spawnPinned, stop, waitReady } from './process';

const TURNS = Number(process.env.BENCH_WATCH_TURNS ?? '100');
const WARM_UP = Number(process.env.BENCH_WATCH_WARM_UP ?? '20');
const MODEL = 'bench-model';
/** How long the model pauses mid-reply: the watcher attaches meanwhile. */
const PAUSE_MS = 50;
const LATER = [' there', ', from', ' the', ' bench', ', live.'];

interface Received {
  id: string;
  event: string;
  data: Record<string, unknown>;
  at: number;
}

/** Reads a server-sent event stream, calling `onEvent` as each event arrives; resolves at its end. */
async function readEvents(res: Response, onEvent: (event: Received) => void): Promise<void> {
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const field = (name: string) => block.match(new RegExp(`^${name}: (.*)$`, 'm'))?.[1] ?? '';
      onEvent({ id: field('id'), event: field('event'), data: JSON.parse(field('data') || '{}'), at: performance.now() });
    }
  }
}

export async function watchBench(env: Record<string, string>, portB: string, token: string): Promise<Array<[string, string]>> {
  let resume: () => void = () => undefined;
  const fake: FakeModelServer = await startFakeModel(() => ({
    kind: 'pause',
    chunks: ['Hello'],
    until: new Promise<void>((resolve) => (resume = () => setTimeout(resolve, PAUSE_MS))),
    rest: LATER,
  }));
  const instance = (port: string) =>
    spawnPinned(serverCpu, ['dist/src/server.js'], {
      ...env,
      PORT: port,
      MODEL_PROVIDER_BASE_URL: fake.baseUrl,
      MODEL_PROVIDER_MODELS: MODEL,
      KNOWLEDGE_INDEX_INTERVAL_MS: '3600000',
    });
  const a = instance(env.PORT as string);
  const b = instance(portB);
  const url = (port: string, path: string) => `http://127.0.0.1:${port}/api/v1${path}`;
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const lags: number[] = [];
  try {
    await Promise.all([a, b].map((_, n) => waitReady(`http://127.0.0.1:${n === 0 ? env.PORT : portB}/readyz`)));
    for (let i = 0; i < WARM_UP + TURNS; i += 1) {
      const created = await fetch(url(env.PORT as string, '/conversations'), {
        method: 'POST',
        headers,
        body: JSON.stringify({ title: 'Bench' }),
      });
      const { conversation } = (await created.json()) as { conversation: { conversationId: string } };
      const body = JSON.stringify({ conversationId: conversation.conversationId, content: `Say hello, turn ${i}.` });
      const generating = await fetch(url(env.PORT as string, '/conversations/messages/stream'), { method: 'POST', headers, body });
      const client: Received[] = [];
      const watcher: Received[] = [];
      let watched: Promise<void> | null = null;
      await readEvents(generating, (event) => {
        client.push(event);
        // Once the first delta is out, B's watcher attaches; the model goes on once it has.
        if (event.event === 'delta' && watched === null) {
          const replyId = (client[0]?.data.reply as { messageId: string }).messageId;
          watched = fetch(url(portB, `/conversations/messages/stream?messageId=${replyId}`), { headers }).then(async (res) => {
            if (res.status !== 200) throw new Error(`the watch answered ${res.status}: ${await res.text()}`);
            return readEvents(res, (e) => {
              watcher.push(e);
              if (e.event === 'delta' && watcher.filter((w) => w.event === 'delta').length === 1) resume();
            });
          });
        }
      });
      await watched;
      const ids = (events: Received[]) => events.map((e) => `${e.id}:${e.event}`).join(' ');
      // Every event once, in order: the watcher's ids are the client's (stored deltas may be one event with the last one's id).
      const last = watcher.at(-1);
      if (!last || last.event !== 'done' || last.id !== client.at(-1)?.id)
        throw new Error(`the watcher got ${ids(watcher)}; the client ${ids(client)}: ${JSON.stringify(client.at(-1)?.data)}`);
      if (i < WARM_UP) continue;
      // The events after the pause, matched by id (a delta coalesced in storage matches its last piece).
      const pause = client.findIndex((e) => e.event === 'delta') + 1;
      for (const sent of client.slice(pause)) {
        const seen = watcher.find((w) => w.id === sent.id);
        if (seen) lags.push(seen.at - sent.at);
      }
    }
    return [
      [
        `watch: a resumed watcher's lag on instance B behind the generating instance A's client, ${TURNS} turns, ${lags.length} events: p50 / p99 (ms)`,
        `${percentile(lags, 50).toFixed(1)} / ${percentile(lags, 99).toFixed(1)}`,
      ],
    ];
  } finally {
    await Promise.all([stop(a), stop(b)]);
    await fake.close();
  }
}
