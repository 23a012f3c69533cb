import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { sql } from 'kysely';
import { type TestUser, useHarnessWith, userNamed } from '../helpers/harness';
import { errorShapeOf } from '../../src/http/error-shape';
import { MAX_NESTING } from '../../src/http/text-guard';
import {
  AWKWARD_CHARACTERS,
  encodeUriText,
  holdsUnstorableText,
  isOmitted,
  nestedJson,
  outOfBoundsFor,
  queryString,
  resolver,
  type Schema,
  valueFor,
  wrongTypeFor,
} from './schema-arbitrary';

/**
 * Property-based fuzzing driven by the OpenAPI document: for every operation, requests built from
 * its schemas (valid as far as a generator can tell), invalid mutations of them, and bodies nested
 * from a few levels to 100,000 (refused past the nesting limit). Whatever is
 * sent: never a 5xx (a response that strays from the document is a 500 too, since response
 * validation is on), every error in the ErrorResponse shape, and a request refused as invalid
 * changes nothing in the database. `FUZZ_REQUESTS` sets the count, `FUZZ_SEED` replays a run.
 */
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 5000);
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);

interface Parameter {
  name: string;
  in: 'query' | 'path' | 'header' | 'cookie';
  required?: boolean;
  schema: Schema;
}
interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  path: string;
  parameters: Parameter[];
  jsonBody: Schema | null;
  rawBody: boolean;
  /** Sent by an administrator (the operation requires a role), else by a plain user. */
  asAdmin: boolean;
  /**
   * The statuses the document answers with a JSON-RPC error (`JsonRpcError`) rather than an
   * ErrorResponse: the MCP transport's own refusals on `/mcp`, as the MCP specification has them.
   */
  jsonRpcErrors: Set<string>;
}
interface Request {
  op: Operation;
  kind: 'valid' | 'missing' | 'wrongType' | 'extra' | 'outOfBounds' | 'malformed' | 'contentType' | 'badQuery' | 'nested';
  url: string;
  query: Record<string, unknown>;
  body: unknown;
  contentType: string | null;
  /** Of a `nested` body (sent as JSON text): its deepest level, and whether the service must refuse it (past the nesting limit, or unstorable text). */
  nesting?: { deepest: number; refused: boolean };
}

/** Stands for the nested value in a body's JSON until it is spliced in. */
const NESTED = `nested-${randomUUID()}`;

const doc = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../generated/openapi.json'), 'utf8'));
const resolve = resolver(doc);
const resolveParameter = (p: Parameter | { $ref: string }): Parameter =>
  '$ref' in p ? (doc.components.parameters[p.$ref.replace('#/components/parameters/', '')] as Parameter) : p;

const operations: Operation[] = Object.entries(doc.paths as Record<string, Record<string, Record<string, unknown>>>).flatMap(([p, item]) =>
  (['get', 'post', 'put', 'patch', 'delete'] as const)
    .filter((method) => item[method])
    .map((method) => {
      const operation = item[method] as {
        parameters?: Parameter[];
        requestBody?: { content: Record<string, { schema: Schema }> };
        'x-required-roles'?: string[];
        responses?: Record<string, unknown>;
      };
      const content = operation.requestBody?.content ?? {};
      const jsonRpcErrors = new Set(
        Object.entries(operation.responses ?? {})
          .filter(([, response]) => JSON.stringify(response).includes('#/components/schemas/JsonRpcError'))
          .map(([status]) => status),
      );
      return {
        method,
        path: p,
        parameters: (operation.parameters ?? []).map(resolveParameter).filter((x) => x.in === 'query' || x.in === 'path'),
        jsonBody: content['application/json']?.schema ?? null,
        rawBody: operation.requestBody !== undefined && !content['application/json'],
        // Turning capabilities off would hide the operations they gate for the rest of the run.
        asAdmin: operation['x-required-roles'] !== undefined && !(method === 'patch' && p === '/api/v1/admin/capabilities'),
        jsonRpcErrors,
      };
    }),
);

const bodySchema = (op: Operation) => {
  const schema = resolve(op.jsonBody as Schema);
  return schema.properties ? schema : null;
};

function requestFor(op: Operation): fc.Arbitrary<Request> {
  const pathParams = op.parameters.filter((p) => p.in === 'path');
  const queryParams = op.parameters.filter((p) => p.in === 'query');
  const query = fc.record(Object.fromEntries(queryParams.map((p) => [p.name, valueFor(p.schema, resolve)])), {
    requiredKeys: queryParams.filter((p) => p.required).map((p) => p.name),
  });
  const url = fc.tuple(...pathParams.map((p) => valueFor(p.schema, resolve).map((v) => encodeUriText(String(v) || 'x')))).map((values) => {
    let u = op.path;
    pathParams.forEach((p, i) => (u = u.replace(`{${p.name}}`, values[i] as string)));
    return u;
  });
  const body = op.jsonBody ? valueFor(op.jsonBody, resolve) : fc.constant(undefined);
  const base = fc.record({ url, query, body }).map((r) => ({ ...r, op, contentType: op.jsonBody ? 'application/json' : null }));

  const variants: fc.Arbitrary<Request>[] = [base.map((r) => ({ ...r, kind: 'valid' as const }))];
  const object = op.jsonBody ? bodySchema(op) : null;
  if (object?.properties) {
    const props = Object.entries(object.properties).filter(([, s]) => !isOmitted(s));
    const required = (object.required ?? []).filter((k) => !isOmitted((object.properties as Record<string, Schema>)[k] as Schema));
    const withBody = (kind: Request['kind'], change: fc.Arbitrary<(b: Record<string, unknown>) => Record<string, unknown>>) =>
      fc.tuple(base, change).map(([r, f]) => ({ ...r, kind, body: f({ ...(r.body as Record<string, unknown>) }) }));
    if (required.length > 0) {
      variants.push(
        withBody(
          'missing',
          fc.constantFrom(...required).map((k) => (b: Record<string, unknown>) => ({ ...b, [k]: undefined })),
        ),
      );
    }
    if (props.length > 0) {
      variants.push(
        withBody(
          'wrongType',
          fc
            .constantFrom(...props)
            .chain(([k, s]) => wrongTypeFor(s, resolve).map((v) => (b: Record<string, unknown>) => ({ ...b, [k]: v }))),
        ),
      );
      const bounded = props.map(([k, s]) => [k, outOfBoundsFor(s, resolve)] as const).filter(([, a]) => a !== null);
      if (bounded.length > 0) {
        variants.push(
          withBody(
            'outOfBounds',
            fc
              .constantFrom(...bounded)
              .chain(([k, a]) => (a as fc.Arbitrary<unknown>).map((v) => (b: Record<string, unknown>) => ({ ...b, [k]: v }))),
          ),
        );
      }
    }
    if (object.additionalProperties === false) {
      // The name of the extra property may hold an awkward character too.
      const extraName = fc.oneof(
        fc.constant('notInTheDocument'),
        fc.constantFrom(...AWKWARD_CHARACTERS).map((odd) => `not${odd}InTheDocument`),
      );
      variants.push(
        withBody(
          'extra',
          extraName.map((name) => (b: Record<string, unknown>) => ({ ...b, [name]: 1 })),
        ),
      );
    }
  }
  if (op.jsonBody) {
    // Nesting as a dimension: the value of one property (or the whole body) nested from a few to
    // 100,000 levels; the body is level 1, so a property's value starts at level 2.
    const targets = object?.properties ? [null, ...Object.keys(object.properties)] : [null];
    variants.push(
      fc.tuple(base, fc.constantFrom(...targets), nestedJson).map(([r, target, nested]) => {
        const deepest = target === null ? nested.levels : nested.levels + 1;
        const body =
          target === null
            ? nested.json
            : JSON.stringify({ ...(r.body as Record<string, unknown>), [target]: NESTED }).replace(`"${NESTED}"`, nested.json);
        const refused =
          deepest > MAX_NESTING ||
          nested.unstorable ||
          (target !== null && holdsUnstorableText({ ...(r.body as Record<string, unknown>), [target]: null }));
        const request: Request = { ...r, kind: 'nested' as const, body, nesting: { deepest, refused } };
        // A counterexample is printed without its body of up to a megabyte.
        const shown = `${op.method.toUpperCase()} ${r.url} with a body ${deepest} levels deep (${body.length} characters): ${body.slice(0, 200)}…`;
        return Object.assign(request, { [fc.toStringMethod]: () => shown });
      }),
    );
    // Unterminated, and a raw (unescaped) NUL inside a string, which JSON does not allow.
    const malformed = fc.constantFrom('{"unterminated": ', '{"a": "\u0000"}');
    variants.push(fc.tuple(base, malformed).map(([r, body]) => ({ ...r, kind: 'malformed' as const, body })));
    variants.push(base.map((r) => ({ ...r, kind: 'contentType' as const, body: JSON.stringify(r.body ?? {}), contentType: 'text/plain' })));
  }
  if (!op.path.includes('{')) {
    const badQuery = fc.oneof(
      fc.constant({ notInTheDocument: 'x' }),
      ...queryParams
        .filter((p) => resolve(p.schema).type === 'integer' || resolve(p.schema).type === 'boolean')
        .map((p) => fc.constant({ [p.name]: 'not-a-value' })),
    );
    variants.push(fc.tuple(base, badQuery).map(([r, q]) => ({ ...r, kind: 'badQuery' as const, query: { ...r.query, ...q } })));
  }
  return fc.oneof(...variants);
}

// Role-guarded operations are sent by an administrator, so that their parameters get past the role check.
const ADMIN_ID = `fuzz-admin-${randomUUID()}`;
const ctx = useHarnessWith(() => ({ BOOTSTRAP_ADMIN_USER_IDS: ADMIN_ID }), 'fuzzer');
let fingerprintSql: string;

/**
 * Row counts and last changes of every table a request could change (not the audit log, which
 * records refused admin calls by design, nor the rate limiter's counts, which every request uses).
 */
async function fingerprint(): Promise<string> {
  const result = await sql.raw<{ f: string }>(fingerprintSql).execute(ctx.h.runtime.database.db);
  return result.rows[0]?.f ?? '';
}

beforeAll(async () => {
  // Background workers would change the database between the two fingerprints of a request.
  const rt = ctx.h.runtime;
  await Promise.all([rt.dispatcher.stop(), rt.runner.stop(), rt.scheduler.stop(), rt.indexer.stop()]);
  const tables = await sql<{ table_name: string; has_updated_at: boolean }>`
    select t.table_name, exists (select 1 from information_schema.columns c
      where c.table_schema = 'public' and c.table_name = t.table_name and c.column_name = 'updated_at') as has_updated_at
    from information_schema.tables t
    where t.table_schema = 'public' and t.table_type = 'BASE TABLE'
      and t.table_name not in ('audit_events', 'rate_limits', 'kysely_migration', 'kysely_migration_lock')
    order by t.table_name`.execute(rt.database.db);
  const parts = tables.rows.map(
    (t) => `(select count(*)::text${t.has_updated_at ? " || '@' || coalesce(max(updated_at)::text, '')" : ''} from "${t.table_name}")`,
  );
  fingerprintSql = `select concat_ws('|', ${parts.join(', ')}) as f`;
});

test(`${REQUESTS} generated requests: no 5xx, errors in the ErrorResponse shape (OpenAI's on /v1), refused requests change nothing`, async () => {
  console.log(
    `fuzzing ${operations.length} operations with ${REQUESTS} requests, seed ${SEED} (replay: make fuzz N=${REQUESTS} SEED=${SEED})`,
  );
  const admin: TestUser = await userNamed(ctx.h, ADMIN_ID);
  const counts: Record<string, number> = {};
  /** Nested bodies sent, by their deepest level. */
  const nested: Record<string, number> = {};
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...operations).chain(requestFor), async (r) => {
      const query = queryString(r.query);
      // Text the service refuses (NUL anywhere, a lone surrogate in the body or the path; one in
      // the query is decoded as U+FFFD) makes a request invalid whatever its kind.
      // A nested body is refused past the nesting limit; below it, it may be valid (a free-form field).
      const refusedBody = r.nesting ? r.nesting.refused : r.kind !== 'valid' || holdsUnstorableText(r.body);
      const invalid = refusedBody || /%00/.test(`${r.url}?${query}`) || /%ED%[AB]/i.test(r.url);
      const before = invalid ? await fingerprint() : '';
      let call = ctx.h
        .http()
        [r.op.method](query ? `${r.url}?${query}` : r.url)
        .set((r.op.asAdmin ? admin : ctx.fuzzer).auth);
      if (r.op.rawBody) call = call.set('content-type', 'application/octet-stream').send(Buffer.from('fuzz'));
      else if (r.contentType && r.body !== undefined) {
        call = call.set('content-type', r.contentType).send(typeof r.body === 'string' ? r.body : JSON.stringify(r.body));
      }
      const res = await call.buffer(true);
      const label = `${r.kind} ${r.op.method.toUpperCase()} ${r.op.path} → ${res.status}`;
      counts[`${res.status}`] = (counts[`${res.status}`] ?? 0) + 1;
      if (r.nesting) {
        const band =
          r.nesting.deepest > 10_000 ? 'over 10,000' : r.nesting.deepest > MAX_NESTING ? `${MAX_NESTING + 1}–10,000` : `1–${MAX_NESTING}`;
        nested[band] = (nested[band] ?? 0) + 1;
      }
      if (res.status >= 500) {
        const sent =
          typeof r.body === 'string' && r.body.length > 2000 ? `${r.body.slice(0, 2000)}… (${r.body.length} characters)` : r.body;
        throw new Error(`${label}: ${JSON.stringify(res.body)} for ${JSON.stringify({ query: r.query, body: sent })}`);
      }
      if (res.status >= 400 && r.op.jsonRpcErrors.has(`${res.status}`) && res.body.jsonrpc === '2.0') {
        expect({ label, message: typeof res.body.error?.message, code: typeof res.body.error?.code }).toEqual({
          label,
          message: 'string',
          code: 'number',
        });
      } else if (res.status >= 400) {
        // The OpenAI-compatible API (/v1) answers in OpenAI's shape, `{ error: { message, type, param, code } }`.
        const body = errorShapeOf(r.op.path) === 'openai' ? { error: res.body.error?.message, code: res.body.error?.code } : res.body;
        expect({ label, error: typeof body.error, code: typeof body.code }).toEqual({ label, error: 'string', code: 'string' });
      }
      if (invalid) {
        expect({ label, status: res.status >= 400 && res.status < 500 }).toEqual({ label, status: true });
        expect({ label, unchanged: (await fingerprint()) === before }).toEqual({ label, unchanged: true });
      }
    }),
    { numRuns: REQUESTS, seed: SEED, endOnFailure: true },
  );
  console.log(`statuses: ${JSON.stringify(counts)}; nested bodies by depth: ${JSON.stringify(nested)}`);
}, 1_800_000);
