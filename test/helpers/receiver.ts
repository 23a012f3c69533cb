import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import type { WebhookEventData } from '../../src/areas/webhooks/events';
import type { Harness, TestUser } from './harness';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

/** What the receiver answers to its n-th request (from 0): a status and headers, or `hang`. */
export type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

export interface Receiver {
  url: string;
  received: Received[];
  /** TCP connections accepted so far. */
  connections: () => number;
  answer: (n: number, request: Received) => Answer;
  /** Answers the requests held by `hang` so far with `status`. */
  release(status?: number): void;
  close(): Promise<void>;
}

/** A webhook receiver on 127.0.0.1 that records every request and answers as `answer` says. */
export async function startReceiver(answer: Receiver['answer'] = () => ({ status: 200 })): Promise<Receiver> {
  let connections = 0;
  const held: http.ServerResponse[] = [];
  const receiver: Receiver = {
    url: '',
    received: [],
    connections: () => connections,
    answer,
    release: (status = 200) => {
      for (const res of held.splice(0)) res.writeHead(status).end();
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (chunk: Buffer) => parts.push(chunk));
    req.on('end', () => {
      const request = { path: req.url ?? '/', headers: req.headers, body: Buffer.concat(parts).toString('utf8'), at: Date.now() };
      const n = receiver.received.length;
      receiver.received.push(request);
      const reply = receiver.answer(n, request);
      if (reply === 'hang') {
        held.push(res);
        return;
      }
      res.writeHead(reply.status, reply.headers ?? {});
      res.end(reply.body ?? '');
    });
  });
  server.on('connection', () => (connections += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return receiver;
}

/** Verifies a received request with the Standard Webhooks reference library; returns its payload. */
export function verify(secret: string, request: Received): { id: string; type: string; createdAt: number; data: Record<string, unknown> } {
  return new Webhook(secret).verify(request.body, request.headers as Record<string, string>) as ReturnType<typeof verify>;
}

/** Subscribes `user` to `events` at `url`; returns the subscription and its secret. */
export async function subscribe(
  h: Harness,
  user: TestUser,
  url: string,
  events: string[] = ['chat.completed'],
  extra: Record<string, unknown> = {},
) {
  const res = await h
    .http()
    .post('/api/v1/webhooks')
    .set(user.auth)
    .send({ url, events, ...extra });
  if (res.status !== 200) throw new Error(`subscribe: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { subscription: { subscriptionId: string } & Record<string, unknown>; secret: string };
}

export type EventType = 'chat.completed' | 'chat.failed' | 'automation.finished' | 'automation.failed';

/** A `data` of each type's documented shape (the delivery log is validated against it). */
export const SAMPLE_DATA: { [T in EventType]: WebhookEventData<T> } = {
  'chat.completed': {
    conversationId: 'c0',
    messageId: 'm0',
    model: 'development',
    content: 'Hello.',
    usage: { inputTokens: 3, outputTokens: 2, costCents: 0 },
  },
  'chat.failed': {
    conversationId: 'c0',
    messageId: 'm0',
    model: 'development',
    errorCode: 'model_provider_error',
    error: 'upstream failed',
  },
  'automation.finished': {
    automationId: 'a0',
    runId: 'r0',
    trigger: 'manual',
    scheduledFor: null,
    outputIds: ['o0'],
    usage: { inputTokens: 3, outputTokens: 2, costCents: 0 },
  },
  'automation.failed': {
    automationId: 'a0',
    runId: 'r0',
    trigger: 'manual',
    scheduledFor: null,
    errorCode: 'model_provider_error',
    error: 'upstream failed',
  },
};

/** Emits one event through the outbox, in its own transaction (`data` over the type's sample); returns the event id. */
export async function emit<T extends EventType>(h: Harness, userId: string, type: T, data: Partial<WebhookEventData<T>> = {}) {
  const sample: WebhookEventData<T> = SAMPLE_DATA[type];
  return h.runtime.database.db
    .transaction()
    .execute((trx) => h.runtime.services.webhooks.emitEvent(trx, type, userId, { ...sample, ...data }));
}

/**
 * Polls until `check` returns a value other than undefined, or fails after `timeoutMs`: a bound
 * that only something broken reaches, also on a loaded machine (the tests' own limit is longer).
 */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}
