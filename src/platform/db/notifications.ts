import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import type { DB } from '../../../generated/db';

/** What a notification listener receives: each payload sent on its channel, by any instance. */
export type NotificationHandler = (payload: string) => void;

/**
 * Postgres `LISTEN` on both drivers. `onReconnect` handlers run after the listening connection
 * was lost and is back (notifications sent meanwhile are lost: their readers poll again).
 */
export interface Notifications {
  /** Listens on `channel` (a constant identifier); resolves once the database listens. */
  listen(channel: string, handler: NotificationHandler): Promise<void>;
  onReconnect(handler: () => void): void;
  close(): Promise<void>;
}

/** Sends `payload` on `channel` through `db` (delivered at commit when `db` is a transaction). */
export async function notify(db: Kysely<DB>, channel: string, payload: string): Promise<void> {
  await sql`select pg_notify(${channel}, ${payload})`.execute(db);
}

/** The longest wait between attempts to connect the listening client again. */
const MAX_RECONNECT_MS = 10_000;

/**
 * Notifications on Postgres: one dedicated client (a pooled one cannot hold a `LISTEN`), connected
 * at the first `listen` and again, with backoff, whenever it loses its server.
 */
export function postgresNotifications(url: string, onError: (error: Error) => void): Notifications {
  const handlers = new Map<string, Set<NotificationHandler>>();
  const reconnected = new Set<() => void>();
  let client: pg.Client | null = null;
  let connecting: Promise<pg.Client> | null = null;
  let closed = false;
  let retryMs = 100;

  const connect = (): Promise<pg.Client> => {
    connecting ??= (async () => {
      const next = new pg.Client({ connectionString: url });
      next.on('notification', (message) => {
        for (const handler of handlers.get(message.channel) ?? []) handler(message.payload ?? '');
      });
      const lost = (error?: Error) => {
        if (client !== next) return;
        client = null;
        if (error) onError(error);
        next.end().catch(() => undefined);
        if (!closed) setTimeout(reconnect, retryMs).unref();
      };
      next.on('error', lost);
      next.on('end', () => lost());
      await next.connect();
      for (const channel of handlers.keys()) await next.query(`LISTEN ${next.escapeIdentifier(channel)}`);
      client = next;
      return next;
    })().finally(() => (connecting = null));
    return connecting;
  };
  const reconnect = () => {
    connect().then(
      () => {
        retryMs = 100;
        for (const handler of reconnected) handler();
      },
      (error: unknown) => {
        onError(error as Error);
        retryMs = Math.min(retryMs * 2, MAX_RECONNECT_MS);
        if (!closed) setTimeout(reconnect, retryMs).unref();
      },
    );
  };

  return {
    async listen(channel, handler) {
      const known = handlers.get(channel);
      if (known) {
        known.add(handler);
        return;
      }
      handlers.set(channel, new Set([handler]));
      // A client connecting meanwhile may have listed the channels before this one: LISTEN is idempotent.
      const current = client ?? (await connect());
      await current.query(`LISTEN ${current.escapeIdentifier(channel)}`);
    },
    onReconnect(handler) {
      reconnected.add(handler);
    },
    async close() {
      closed = true;
      const current = client;
      client = null;
      await current?.end().catch(() => undefined);
    },
  };
}

/** The part of PGlite's interface notifications use. */
interface Listening {
  listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>>;
}

/** Notifications on PGlite: its own `listen`, in the one process that holds the database. */
export function pgliteNotifications(pglite: Listening): Notifications {
  const stops: Array<() => Promise<void>> = [];
  return {
    async listen(channel, handler) {
      stops.push(await pglite.listen(channel, handler));
    },
    onReconnect: () => undefined,
    async close() {
      await Promise.allSettled(stops.splice(0).map((stop) => stop()));
    },
  };
}
