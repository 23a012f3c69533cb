/**
 * The baselines of B1 in `make bench`: `GET /<route>?limit=20` for each list route of
 * bench/lists.ts, doing what the service must do for it and nothing else: verify the bearer JWT
 * once (jose, the same key, issuer and audience) and then remember it, as the service does; read
 * the `limit + 1` rows with one prepared statement per route (pg); answer the same JSON, written
 * by the serializer the service compiles from the document for the route's operation (a limit
 * writing it with JSON.stringify would do more work than the service must).
 * `fastify` is the peer a user would pick instead; `http` (bare node:http) is the limit.
 *   tsx bench/baseline.ts fastify|http   (PORT, DATA_DIR, DATABASE_URL)
 */
import http from 'node:http';
import Fastify from 'fastify';
import { jwtVerify } from 'jose';
import pg from 'pg';
import { serializerFor } from '../src/http/json-writer';
import { DEV_AUDIENCE, DEV_ISSUER, loadDevAuthMaterial } from '../src/platform/tokens';
import { LIST_ROUTES, type ListRoute } from './lists';

pg.types.setTypeParser(20, (value) => Number(value));

// Stopped by SIGTERM: an exit rather than the signal's default, so that `--cpu-prof` writes its profile.
process.on('SIGTERM', () => process.exit(0));

async function main(): Promise<void> {
  const kind = process.argv[2];
  const { publicKey } = await loadDevAuthMaterial(process.env.DATA_DIR as string);
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
  const verified = new Map<string, string>();
  const routes = new Map(LIST_ROUTES.map((route) => [`/${route.name}`, route]));

  /** The caller's user id, verifying a token only the first time it is seen; null when it does not verify. */
  async function userOf(authorization: string | undefined): Promise<string | null> {
    const token = authorization?.startsWith('Bearer ') ? authorization.slice(7) : '';
    const known = verified.get(token);
    if (known !== undefined) return known;
    try {
      const { payload } = await jwtVerify(token, publicKey, { issuer: DEV_ISSUER, audience: DEV_AUDIENCE, algorithms: ['ES256'] });
      verified.set(token, payload.sub as string);
      return payload.sub as string;
    } catch {
      return null;
    }
  }

  /** The JSON body of a page of `route`, or null when the token does not verify. */
  async function page(route: ListRoute, authorization: string | undefined, limit: number): Promise<string | null> {
    const userId = await userOf(authorization);
    if (userId === null) return null;
    const { rows } = await pool.query({ name: route.name, text: route.select, values: [userId, limit + 1] });
    const items = rows.slice(0, limit);
    const last = items[items.length - 1] as Record<string, string> | undefined;
    return serializerFor(route.operationId)({
      [route.items]: route.item ? items.map((row) => route.item?.(row, userId)) : items,
      nextCursor: rows.length > limit && last ? Buffer.from(Object.values(last)[0] as string).toString('base64url') : null,
    });
  }

  const unauthenticated = '{"error":"Authentication is required.","code":"unauthenticated"}';
  const port = Number(process.env.PORT);
  if (kind === 'fastify') {
    const app = Fastify({ logger: false });
    for (const route of LIST_ROUTES) {
      app.get<{ Querystring: { limit?: string } }>(`/${route.name}`, async (req, reply) => {
        const body = await page(route, req.headers.authorization, Number(req.query.limit ?? 50));
        return reply
          .code(body === null ? 401 : 200)
          .type('application/json')
          .send(body ?? unauthenticated);
      });
    }
    await app.listen({ port, host: '127.0.0.1' });
  } else {
    http
      .createServer(async (req, res) => {
        const url = new URL(req.url ?? '/', 'http://x');
        const route = routes.get(url.pathname);
        const body = route ? await page(route, req.headers.authorization, Number(url.searchParams.get('limit') ?? 50)) : null;
        res.writeHead(body === null ? 401 : 200, { 'content-type': 'application/json' });
        res.end(body ?? unauthenticated);
      })
      .listen(port, '127.0.0.1');
  }
}

void main();
