import http from 'node:http';
import { sql } from 'kysely';
import { textBody, type TestUser, useHarnessWith } from '../helpers/harness';
import { parseEvents, useFakeModelAndReceiver } from '../helpers/openai-server';
import { eventually, subscribe, verify } from '../helpers/receiver';

const servers = useFakeModelAndReceiver();
const ctx = useHarnessWith(
  () => ({
    MODEL_PROVIDER_BASE_URL: servers.model.baseUrl,
    MODEL_PROVIDER_MODELS: 'test-model:100:200',
    WEBHOOK_ALLOW_LOOPBACK: 'true',
    WEBHOOK_POLL_INTERVAL_MS: '20',
  }),
  'alice',
  'bob',
);

async function conversation(user: TestUser): Promise<string> {
  const res = await ctx.h.http().post('/api/v1/conversations').set(user.auth).send({});
  expect(res.status).toBe(200);
  return res.body.conversation.conversationId;
}

const ids = (text: string) =>
  text
    .split('\n\n')
    .filter((b) => b.trim() !== '')
    .map((b) =>
      Number(
        b
          .split('\n')
          .find((l) => l.startsWith('id: '))
          ?.slice(4),
      ),
    );

/** Opens a streamed reply and resolves with its reply id and everything the stream sent, once it ended. */
function openStream(user: TestUser, conversationId: string) {
  let body = '';
  let replyId: (id: string) => void = () => undefined;
  const started = new Promise<string>((resolve) => (replyId = resolve));
  const ended = new Promise<string>((resolve, reject) => {
    const req = http.request(`${ctx.h.baseUrl}/api/v1/conversations/messages/stream`, {
      method: 'POST',
      headers: { ...user.auth, 'content-type': 'application/json' },
    });
    req.on('response', (res) => {
      res.on('data', (chunk: Buffer) => {
        body += chunk.toString();
        if (body.includes('event: delta')) void pending(user, conversationId).then(replyId);
      });
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end(JSON.stringify({ conversationId, content: 'Write the plan.' }));
  });
  return { started, ended };
}

async function pending(user: TestUser, conversationId: string): Promise<string> {
  const res = await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(user.auth);
  return (res.body.messages as Array<{ messageId: string; role: string }>).find((m) => m.role === 'assistant')!.messageId;
}

describe('stopping a reply', () => {
  test('a generating reply stops: its text kept, charged, chat.completed with status stopped, its stream ends stopped', async () => {
    servers.model.behaviour = () => ({ kind: 'stall', chunks: ['Half ', 'a plan'] });
    const user = await ctx.h.newUser('stopper');
    const { secret } = await subscribe(ctx.h, user, `${servers.receiver.url}/stopped`, ['chat.completed']);
    const conversationId = await conversation(user);
    const { started, ended } = openStream(user, conversationId);
    const messageId = await started;
    await eventually(async () => {
      const row = await ctx.h.runtime.database.db.selectFrom('messages').select('id').where('id', '=', messageId).executeTakeFirst();
      return row ? true : undefined;
    });
    const res = await ctx.h.http().post('/api/v1/conversations/stop').set(user.auth).send({ messageId });
    expect(res.status).toBe(200);
    const stopped = await eventually(async () => {
      const m = (await ctx.h.http().get('/api/v1/conversations/messages').query({ conversationId }).set(user.auth)).body.messages[0];
      return m.status === 'stopped' ? m : undefined;
    });
    expect(stopped).toMatchObject({ messageId, content: 'Half a plan', errorCode: null, usage: { outputTokens: 3 } });
    const text = await ended;
    const events = parseEvents(text);
    expect(events.at(-1)).toMatchObject({ event: 'stopped', data: { message: { messageId, status: 'stopped', content: 'Half a plan' } } });
    const seen = ids(text);
    expect(seen).toEqual(seen.map((_, i) => i + 1));
    const usage = await sql<{ n: number }>`select count(*)::int as n from usage_records where resource_id = ${messageId}`.execute(
      ctx.h.runtime.database.db,
    );
    expect(usage.rows[0]!.n).toBe(1);
    const hook = await eventually(() => servers.receiver.received.find((r) => r.path === '/hook/stopped'));
    expect(verify(secret, hook)).toMatchObject({ type: 'chat.completed', data: { messageId, status: 'stopped', content: 'Half a plan' } });

    // Ended: a second stop is a conflict; another user's is not found; bad input is a 400.
    const again = await ctx.h.http().post('/api/v1/conversations/stop').set(user.auth).send({ messageId });
    expect({ status: again.status, code: again.body.code }).toEqual({ status: 409, code: 'conflict' });
    const other = await ctx.h.http().post('/api/v1/conversations/stop').set(ctx.bob.auth).send({ messageId });
    expect({ status: other.status, code: other.body.code }).toEqual({ status: 404, code: 'not_found' });
    for (const body of [{}, { messageId: 7 }, { messageId, extra: true }]) {
      const bad = await ctx.h.http().post('/api/v1/conversations/stop').set(user.auth).send(body);
      expect({ status: bad.status, code: bad.body.code }).toEqual({ status: 400, code: 'invalid_request' });
    }
  });
});

describe('following a reply', () => {
  test('replays the stored events of a finished reply with their ids, after Last-Event-ID; 204 once the client has the end', async () => {
    servers.model.behaviour = () => ({ kind: 'reply', chunks: ['One ', 'two ', 'three.'] });
    const conversationId = await conversation(ctx.alice);
    const posted = await ctx.h
      .http()
      .post('/api/v1/conversations/messages/stream')
      .set(ctx.alice.auth)
      .send({ conversationId, content: 'Count.' })
      .buffer(true)
      .parse(textBody);
    const events = parseEvents(posted.body as string);
    const messageId = (events.at(-1)!.data.message as { messageId: string }).messageId;
    const finalId = ids(posted.body as string).at(-1)!;

    const watch = (lastEventId?: string, user = ctx.alice) => {
      const req = ctx.h.http().get('/api/v1/conversations/messages/stream').query({ messageId }).set(user.auth);
      return (lastEventId === undefined ? req : req.set('Last-Event-ID', lastEventId)).buffer(true).parse(textBody);
    };
    const all = await eventually(async () => {
      const res = await watch();
      return parseEvents(res.body as string).at(-1)?.event === 'done' ? res : undefined;
    });
    expect(all.status).toBe(200);
    const replayed = parseEvents(all.body as string);
    expect(replayed.at(-1)).toEqual(events.at(-1));
    const text = (list: typeof events) =>
      list
        .filter((e) => e.event === 'delta')
        .map((e) => e.data.text)
        .join('');
    expect(text(replayed)).toBe('One two three.');

    // After the first delta (id 2): the rest of the text once, then the end.
    const rest = await watch('2');
    expect(text(parseEvents(rest.body as string))).toBe('two three.');
    expect(ids(rest.body as string).every((id) => id > 2)).toBe(true);
    const done = await watch(String(finalId));
    expect(done.status).toBe(204);

    expect((await watch(undefined, ctx.bob)).status).toBe(404);
    expect((await watch('not-a-number')).status).toBe(400);
    const missing = await ctx.h.http().get('/api/v1/conversations/messages/stream').set(ctx.alice.auth);
    expect(missing.status).toBe(400);
  });
});
