/**
 * The baselines of B1 in `make bench`: `GET /notes?limit=20` doing what the service's
 * `GET /api/v1/notes?limit=20` does at its core, and nothing else: verify the bearer JWT (jose,
 * the same key, issuer and audience), read 21 rows of the caller's notes (pg, the same query
 * shape), answer the same JSON. `fastify` is the peer a user would pick instead; `http` (bare
 * node:http) is the limit.
 *   tsx bench/baseline.ts fastify|http   (PORT, DATA_DIR, DATABASE_URL)
 */
import http from 'node:http';
import Fastify from 'fastify';
import { jwtVerify } from 'jose';
import pg from 'pg';
import { DEV_AUDIENCE, DEV_ISSUER, loadDevAuthMaterial } from '../src/platform/tokens';

pg.types.setTypeParser(20, (value) => Number(value));

async function main(): Promise<void> {
  const kind = process.argv[2];
  const { publicKey } = await loadDevAuthMaterial(process.env.DATA_DIR as string);
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });

  /** The JSON body for a bearer header, or null when the token does not verify. */
  async function notes(authorization: string | undefined, limit: number): Promise<string | null> {
    const token = authorization?.startsWith('Bearer ') ? authorization.slice(7) : '';
    let userId: string;
    try {
      const { payload } = await jwtVerify(token, publicKey, { issuer: DEV_ISSUER, audience: DEV_AUDIENCE, algorithms: ['ES256'] });
      userId = payload.sub as string;
    } catch {
      return null;
    }
    const { rows } = await pool.query(
      'select id, title, content, project_id, pinned, created_at, updated_at from notes where owner_user_id = $1 order by id desc limit $2',
      [userId, limit + 1],
    );
    const page = rows.slice(0, limit);
    return JSON.stringify({
      notes: page.map((r) => ({
        noteId: r.id,
        title: r.title,
        content: r.content,
        projectId: r.project_id,
        pinned: r.pinned,
        createdAt: r.created_at.getTime(),
        updatedAt: r.updated_at.getTime(),
      })),
      nextCursor: rows.length > limit ? Buffer.from(page[page.length - 1].id).toString('base64url') : null,
    });
  }

  const port = Number(process.env.PORT);
  if (kind === 'fastify') {
    const app = Fastify({ logger: false });
    app.get<{ Querystring: { limit?: string } }>('/notes', async (req, reply) => {
      const body = await notes(req.headers.authorization, Number(req.query.limit ?? 50));
      if (body === null) return reply.code(401).send({ error: 'Authentication is required.', code: 'unauthenticated' });
      return reply.type('application/json').send(body);
    });
    await app.listen({ port, host: '127.0.0.1' });
  } else {
    http
      .createServer(async (req, res) => {
        const url = new URL(req.url ?? '/', 'http://x');
        const body = url.pathname === '/notes' ? await notes(req.headers.authorization, Number(url.searchParams.get('limit') ?? 50)) : null;
        res.writeHead(body === null ? 401 : 200, { 'content-type': 'application/json' });
        res.end(body ?? '{"error":"Authentication is required.","code":"unauthenticated"}');
      })
      .listen(port, '127.0.0.1');
  }
}

void main();
