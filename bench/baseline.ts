/**
 * The limit of B1 in `make bench`: `GET /api/v1/<route>?limit=20` for each list route of
 * bench/lists.ts on bare node:http, doing what the service must do for it and nothing else: verify
 * the bearer JWT once (jose, the same key, issuer and audience) and then remember it, as the
 * service remembers verified tokens; read the `limit + 1` rows with one prepared statement per
 * route (pg); answer the same JSON (JSON.stringify, as Express's res.json writes it).
 *   tsx bench/baseline.ts   (PORT, DATA_DIR, DATABASE_URL)
 */
import http from 'node:http';
import { jwtVerify } from 'jose';
import pg from 'pg';
import { DEV_AUDIENCE, DEV_ISSUER, loadDevAuthMaterial } from '../src/platform/tokens';
import { LIST_ROUTES, type ListRoute } from './lists';

pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

// Stopped by SIGTERM: an exit rather than the signal's default, so that `--cpu-prof` writes its profile.
process.on('SIGTERM', () => process.exit(0));

async function main(): Promise<void> {
  const { publicKey } = await loadDevAuthMaterial(process.env.DATA_DIR as string);
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
  pool.on('error', () => undefined); // an idle client's lost connection: the next query reconnects
  const verified = new Map<string, string>();
  const routes = new Map(LIST_ROUTES.map((route) => [`/api/v1/${route.name}`, route]));

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
    const shown = rows.slice(0, limit);
    const items = route.item ? shown.map((row) => route.item?.(row, userId)) : shown;
    const last = items[items.length - 1] as Record<string, string> | undefined;
    return JSON.stringify({
      [route.items]: items,
      nextCursor: rows.length > limit && last ? Buffer.from(Object.values(last)[0] as string).toString('base64url') : null,
    });
  }

  const unauthenticated = '{"error":"Authentication is required.","code":"unauthenticated"}';
  http
    .createServer(async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const route = routes.get(url.pathname);
      const body = route ? await page(route, req.headers.authorization, Number(url.searchParams.get('limit') ?? 50)) : null;
      res.writeHead(body === null ? 401 : 200, { 'content-type': 'application/json' });
      res.end(body ?? unauthenticated);
    })
    .listen(Number(process.env.PORT), '127.0.0.1');
}

void main();
