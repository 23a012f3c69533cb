/**
 * The plain peer of B1 in `make bench`: the list routes of bench/lists.ts written the way the
 * design card reads, each library used the way its documentation shows: Express 5; helmet and
 * cors with their defaults; express.json and cookie-parser before express-openapi-validator,
 * which is given the whole document (generated/openapi.json) at app level, requests validated and
 * answers not; jose verifying the bearer token on every request, as the validator's security
 * handler; Kysely's PostgresDialect over a pg.Pool of the service's default size; each page
 * answered with res.json. It serves the page B1 asks for (`GET /api/v1/<route>?limit=20`): the
 * lists' filters and cursors, which B1 does not send, are left out.
 *   tsx bench/peer.ts   (PORT, DATA_DIR, DATABASE_URL)
 */
import path from 'node:path';
import cookieParser from 'cookie-parser';
import cors from 'cors';
import express, { type ErrorRequestHandler, type Request } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import helmet from 'helmet';
import { jwtVerify } from 'jose';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DB } from '../generated/db';
import { DEV_AUDIENCE, DEV_ISSUER, loadDevAuthMaterial } from '../src/platform/tokens';
import { LIST_ROUTES } from './lists';
import { root } from './process';

// int8 (the epoch milliseconds) as numbers, as the service reads them.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

// Stopped by SIGTERM: an exit rather than the signal's default, so that `--cpu-prof` writes its profile.
process.on('SIGTERM', () => process.exit(0));

/** The error codes of the service's ErrorResponse, by the status the validator or a handler failed with. */
const CODES: Record<number, string> = {
  400: 'invalid_request',
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
};

const answerError: ErrorRequestHandler = (
  error: { status?: number; message?: string; errors?: Array<{ path: string; message: string }> },
  _req,
  res,
  _next,
) => {
  const status = error.status ?? 500;
  res.status(status).json({
    error: status < 500 ? error.message : 'Internal error.',
    code: CODES[status] ?? 'internal',
    ...(status === 400 && error.errors ? { details: error.errors.map(({ path: at, message }) => ({ path: at, message })) } : {}),
  });
};

async function main(): Promise<void> {
  const { publicKey } = await loadDevAuthMaterial(process.env.DATA_DIR as string);
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
  pool.on('error', () => undefined); // an idle client's lost connection: the next query reconnects
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  /** Each request's verified caller, set by the security handler. */
  const callers = new WeakMap<Request, string>();

  const app = express();
  app.use(helmet());
  app.use(cors());
  app.use(express.json());
  app.use(cookieParser());
  app.use(
    OpenApiValidator.middleware({
      apiSpec: path.join(root, 'generated', 'openapi.json'),
      validateRequests: true,
      validateResponses: false,
      validateSecurity: {
        handlers: {
          bearerAuth: async (req) => {
            const token = req.headers.authorization?.replace(/^Bearer /i, '') ?? '';
            const { payload } = await jwtVerify(token, publicKey, { issuer: DEV_ISSUER, audience: DEV_AUDIENCE, algorithms: ['ES256'] });
            callers.set(req, payload.sub as string);
            return true;
          },
          // The peer opens no browser sessions.
          browserSession: () => false,
        },
      },
    }),
  );
  for (const route of LIST_ROUTES) {
    app.get(`/api/v1/${route.name}`, async (req, res) => {
      const userId = callers.get(req) as string;
      const limit = Number(req.query.limit); // validated, coerced and defaulted by the validator
      const rows = await route.page(db, userId, limit + 1);
      const items = rows.slice(0, limit);
      const last = items[items.length - 1];
      res.json({
        [route.items]: items,
        nextCursor: rows.length > limit && last ? Buffer.from(String(Object.values(last)[0])).toString('base64url') : null,
      });
    });
  }
  app.use(answerError);
  app.listen(Number(process.env.PORT), '127.0.0.1');
}

void main();
