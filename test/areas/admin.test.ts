import { randomUUID } from 'node:crypto';
import { AuditService } from '../../src/areas/audit/service';
import { auditEventCsvLine } from '../../src/areas/audit/presenter';
import { loadApiDocument } from '../../src/http/openapi';
import { signDevToken } from '../../src/platform/tokens';
import { type Harness, startHarness, type TestUser, textBody } from '../helpers/harness';

// Principals and the audit log are shared by every test of a run, so each test names its own users.
let h: Harness;
let root: TestUser;
const rootId = `root-${randomUUID()}`;

beforeAll(async () => {
  h = await startHarness({ BOOTSTRAP_ADMIN_USER_IDS: rootId });
  const token = await signDevToken(h.runtime.devAuth!, rootId);
  root = { ...(await h.newUser('unused')), userId: rootId, token, auth: { Authorization: `Bearer ${token}` } };
});
afterAll(() => h.close());

async function userWithRole(role: string | null): Promise<TestUser> {
  const user = await h.newUser(role ?? 'norole');
  if (role) {
    await h.http().post('/api/v1/admin/principals').set(root.auth).send({ userId: user.userId, role, reason: 'test' }).expect(200);
  }
  return user;
}

/** A new group (made by the first admin), for the matrix's calls on one. */
const newGroup = async (): Promise<string> =>
  (
    await h
      .http()
      .post('/api/v1/admin/groups')
      .set(root.auth)
      .send({ name: `matrix-${randomUUID()}` })
      .expect(200)
  ).body.group.groupId;

/** A new quota of a new group (made by the first admin), for the matrix's calls on one. */
const newQuota = async (): Promise<string> =>
  (
    await h
      .http()
      .post('/api/v1/admin/quotas')
      .set(root.auth)
      .send({ groupId: await newGroup(), period: 'month', limitCents: 100 })
      .expect(200)
  ).body.quota.quotaId;

const events = (where: { actor?: string; action?: string; outcome?: string; resourceId?: string }) => {
  let query = h.runtime.database.db.selectFrom('audit_events').selectAll().orderBy('id');
  if (where.actor) query = query.where('actor_user_id', '=', where.actor);
  if (where.action) query = query.where('action', '=', where.action);
  if (where.outcome) query = query.where('outcome', '=', where.outcome);
  if (where.resourceId) query = query.where('resource_id', '=', where.resourceId);
  return query.execute();
};

describe('bootstrap', () => {
  test('BOOTSTRAP_ADMIN_USER_IDS makes the first admin, audited', async () => {
    const res = await h.http().get('/api/v1/admin/principals').set(root.auth);
    expect(res.status).toBe(200);
    expect(res.body.principals).toContainEqual(expect.objectContaining({ userId: rootId, role: 'admin', grantedBy: 'system:bootstrap' }));
    const granted = await events({ action: 'administration.principal.grant', resourceId: rootId });
    expect(granted).toHaveLength(1);
    expect(granted[0]).toMatchObject({ actor_user_id: 'system:bootstrap', outcome: 'success' });
  });
});

type Call = { operationId: string; allowed: string[]; send: (user: TestUser) => Promise<{ status: number }> };

const calls: Call[] = [
  { operationId: 'listAdminPrincipals', allowed: ['admin'], send: (u) => h.http().get('/api/v1/admin/principals').set(u.auth) },
  {
    operationId: 'grantAdminPrincipal',
    allowed: ['admin'],
    send: (u) =>
      h
        .http()
        .post('/api/v1/admin/principals')
        .set(u.auth)
        .send({ userId: `target-${randomUUID()}`, role: 'support', reason: 'matrix' }),
  },
  {
    operationId: 'revokeAdminPrincipal',
    allowed: ['admin'],
    send: async (u) => {
      const target = `target-${randomUUID()}`;
      await h
        .http()
        .post('/api/v1/admin/principals')
        .set(root.auth)
        .send({ userId: target, role: 'support', reason: 'to revoke' })
        .expect(200);
      return h.http().delete('/api/v1/admin/principals').set(u.auth).send({ userId: target });
    },
  },
  {
    operationId: 'listAuditEvents',
    allowed: ['admin', 'auditor'],
    send: (u) => h.http().get('/api/v1/admin/audit').query({ limit: 1 }).set(u.auth),
  },
  {
    operationId: 'exportAuditEvents',
    allowed: ['admin', 'auditor'],
    send: (u) =>
      h
        .http()
        .get('/api/v1/admin/audit/export')
        .query({ actorUserId: `nobody-${randomUUID()}` })
        .set(u.auth),
  },
  {
    operationId: 'getAdminUsage',
    allowed: ['admin', 'billing_admin'],
    send: (u) => h.http().get('/api/v1/admin/usage').query({ userId: 'someone' }).set(u.auth),
  },
  {
    operationId: 'adjustAdminBudget',
    allowed: ['admin', 'billing_admin'],
    send: (u) =>
      h
        .http()
        .post('/api/v1/admin/usage')
        .set(u.auth)
        .send({ userId: `budget-${randomUUID()}`, amountCents: 100 }),
  },
  {
    operationId: 'updateCapabilities',
    allowed: ['admin'],
    send: (u) => h.http().patch('/api/v1/admin/capabilities').set(u.auth).send({ automations: true }),
  },
  { operationId: 'getModelPolicy', allowed: ['admin', 'auditor'], send: (u) => h.http().get('/api/v1/admin/model-policy').set(u.auth) },
  {
    operationId: 'updateModelPolicy',
    allowed: ['admin'],
    send: (u) => h.http().patch('/api/v1/admin/model-policy').set(u.auth).send({ block: [] }),
  },
  {
    operationId: 'getAdminAccessTokens',
    allowed: ['admin'],
    send: (u) => h.http().get('/api/v1/admin/access-tokens').query({ limit: 1 }).set(u.auth),
  },
  {
    operationId: 'revokeAdminAccessToken',
    allowed: ['admin'],
    send: async (u) => {
      const created = await h
        .http()
        .post('/api/v1/access-tokens')
        .set(u.auth)
        .send({ name: 'matrix', scopes: ['read'] })
        .expect(200);
      return h.http().delete('/api/v1/admin/access-tokens').query({ tokenId: created.body.accessToken.tokenId }).set(u.auth);
    },
  },
  {
    operationId: 'getAdminGroups',
    allowed: ['admin', 'auditor'],
    send: (u) => h.http().get('/api/v1/admin/groups').query({ limit: 1 }).set(u.auth),
  },
  {
    operationId: 'createAdminGroup',
    allowed: ['admin'],
    send: (u) =>
      h
        .http()
        .post('/api/v1/admin/groups')
        .set(u.auth)
        .send({ name: `matrix-${randomUUID()}` }),
  },
  {
    operationId: 'updateAdminGroup',
    allowed: ['admin'],
    send: async (u) => {
      const groupId = await newGroup();
      return h.http().patch('/api/v1/admin/groups').set(u.auth).send({ groupId, description: 'changed' });
    },
  },
  {
    operationId: 'deleteAdminGroup',
    allowed: ['admin'],
    send: async (u) => {
      const groupId = await newGroup();
      return h.http().delete('/api/v1/admin/groups').set(u.auth).send({ groupId });
    },
  },
  {
    operationId: 'listAdminGroupMembers',
    allowed: ['admin', 'auditor'],
    send: async (u) => {
      const groupId = await newGroup();
      return h.http().get('/api/v1/admin/groups/members').query({ groupId }).set(u.auth);
    },
  },
  {
    operationId: 'updateAdminGroupMembers',
    allowed: ['admin'],
    send: async (u) => {
      const groupId = await newGroup();
      return h
        .http()
        .patch('/api/v1/admin/groups/members')
        .set(u.auth)
        .send({ groupId, add: ['bob'] });
    },
  },
  {
    operationId: 'getAdminGroupModelPolicies',
    allowed: ['admin', 'auditor'],
    send: (u) => h.http().get('/api/v1/admin/groups/model-policy').query({ limit: 1 }).set(u.auth),
  },
  {
    operationId: 'updateAdminGroupModelPolicy',
    allowed: ['admin'],
    send: async (u) => {
      const groupId = await newGroup();
      return h
        .http()
        .patch('/api/v1/admin/groups/model-policy')
        .set(u.auth)
        .send({ groupId, block: ['gpt-4o'] });
    },
  },
  {
    operationId: 'deleteAdminGroupModelPolicy',
    allowed: ['admin'],
    send: async (u) => {
      const groupId = await newGroup();
      await h
        .http()
        .patch('/api/v1/admin/groups/model-policy')
        .set(root.auth)
        .send({ groupId, block: ['gpt-4o'] })
        .expect(200);
      return h.http().delete('/api/v1/admin/groups/model-policy').set(u.auth).send({ groupId });
    },
  },
  {
    operationId: 'getAdminQuotas',
    allowed: ['admin', 'auditor'],
    send: (u) => h.http().get('/api/v1/admin/quotas').query({ limit: 1 }).set(u.auth),
  },
  {
    operationId: 'createAdminQuota',
    allowed: ['admin'],
    send: async (u) => {
      const groupId = await newGroup();
      return h.http().post('/api/v1/admin/quotas').set(u.auth).send({ groupId, period: 'day', limitCents: 10 });
    },
  },
  {
    operationId: 'updateAdminQuota',
    allowed: ['admin'],
    send: async (u) => {
      const quotaId = await newQuota();
      return h.http().patch('/api/v1/admin/quotas').set(u.auth).send({ quotaId, limitCents: 200 });
    },
  },
  {
    operationId: 'deleteAdminQuota',
    allowed: ['admin'],
    send: async (u) => {
      const quotaId = await newQuota();
      return h.http().delete('/api/v1/admin/quotas').set(u.auth).send({ quotaId });
    },
  },
  {
    operationId: 'listAdminFeedback',
    allowed: ['admin'],
    send: (u) => h.http().get('/api/v1/admin/feedback').query({ limit: 1 }).set(u.auth),
  },
];

describe('the role × route matrix', () => {
  const doc = loadApiDocument();
  const auditOf = (operationId: string) => {
    for (const item of Object.values(doc.paths)) {
      for (const op of Object.values(item as Record<string, { operationId?: string; 'x-audit'?: { action: string } }>)) {
        if (op?.operationId === operationId) return op['x-audit']!.action;
      }
    }
    throw new Error(operationId);
  };

  test('covers every operation that declares roles', () => {
    const guarded = Object.values(doc.paths).flatMap((item) =>
      Object.values(item as Record<string, { operationId?: string; 'x-required-roles'?: string[] }>)
        .filter((op) => op?.['x-required-roles'])
        .map((op) => op.operationId),
    );
    expect(calls.map((c) => c.operationId).sort()).toEqual(guarded.sort());
  });

  for (const role of ['admin', 'auditor', 'billing_admin', 'support', null]) {
    for (const call of calls) {
      const allowed = role !== null && call.allowed.includes(role);
      test(`${role ?? 'no role'} → ${call.operationId}: ${allowed ? 'allowed' : '403 and one denied event'}`, async () => {
        const user = await userWithRole(role);
        const res = await call.send(user);
        const denied = await events({ actor: user.userId, outcome: 'denied' });
        if (allowed) {
          expect(res.status).toBe(200);
          expect(denied).toHaveLength(0);
        } else {
          expect(res.status).toBe(403);
          expect((res as unknown as { body: { code: string } }).body.code).toBe('forbidden');
          expect(denied).toHaveLength(1);
          expect(denied[0]).toMatchObject({ action: auditOf(call.operationId), outcome: 'denied', actor_user_id: user.userId });
          expect(denied[0]!.metadata).toMatchObject({
            operationId: call.operationId,
            method: expect.any(String),
            path: expect.stringMatching(/^\/api\/v1\/admin\//),
          });
        }
      });
    }
  }

  test('a call without credentials (or with a bad token) is 401 and records nothing', async () => {
    const requestId = `anon-${randomUUID()}`;
    for (const headers of [{}, { Authorization: 'Bearer not-a-token' }]) {
      expect((await h.http().get('/api/v1/admin/principals').set(headers).set('X-Request-Id', requestId)).status).toBe(401);
      const res = await h
        .http()
        .post('/api/v1/admin/usage')
        .set(headers)
        .set('X-Request-Id', requestId)
        .send({ userId: 'x', amountCents: 1 });
      expect(res.status).toBe(401);
    }
    const recorded = await h.runtime.database.db.selectFrom('audit_events').select('id').where('request_id', '=', requestId).execute();
    expect(recorded).toHaveLength(0);
  });

  test('a refused call records the request id that the client sent', async () => {
    const user = await userWithRole('support');
    const requestId = `denied-${randomUUID()}`;
    expect((await h.http().get('/api/v1/admin/audit').set(user.auth).set('X-Request-Id', requestId)).status).toBe(403);
    const recorded = await h.runtime.database.db.selectFrom('audit_events').selectAll().where('request_id', '=', requestId).execute();
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ outcome: 'denied', action: 'administration.audit.list', resource_type: 'audit_log' });
  });
});

describe('principals', () => {
  test('grant → list → revoke → revoke again, with grant and revoke events', async () => {
    const target = `bob-${randomUUID()}`;
    const granted = await h
      .http()
      .post('/api/v1/admin/principals')
      .set(root.auth)
      .send({ userId: target, role: 'auditor', reason: 'Q4 audit' });
    expect(granted.status).toBe(200);
    expect(granted.body.principal).toMatchObject({ userId: target, role: 'auditor', reason: 'Q4 audit', grantedBy: rootId });
    const again = await h.http().post('/api/v1/admin/principals').set(root.auth).send({ userId: target, role: 'auditor', reason: 'other' });
    expect(again.body.principal).toEqual(granted.body.principal);

    const list = await h.http().get('/api/v1/admin/principals').set(root.auth);
    expect(list.body.principals).toContainEqual(granted.body.principal);

    const revoked = await h.http().delete('/api/v1/admin/principals').query({ userId: target }).set(root.auth);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ userId: target, revoked: ['auditor'] });
    const twice = await h.http().delete('/api/v1/admin/principals').send({ userId: target }).set(root.auth);
    expect(twice.status).toBe(404);
    expect(twice.body.code).toBe('principal_not_found');

    const trail = await events({ resourceId: target, outcome: 'success' });
    expect(trail.map((e) => e.action)).toEqual([
      'administration.principal.grant',
      'administration.principal.grant',
      'administration.principal.revoke',
    ]);
    expect(trail[0]).toMatchObject({
      actor_user_id: rootId,
      resource_type: 'administrative_principal',
      metadata: { role: 'auditor', reason: 'Q4 audit' },
    });
  });

  test('a role can be revoked alone; query and body must agree', async () => {
    const target = `carol-${randomUUID()}`;
    for (const role of ['auditor', 'billing_admin']) {
      await h.http().post('/api/v1/admin/principals').set(root.auth).send({ userId: target, role, reason: 'r' }).expect(200);
    }
    const one = await h.http().delete('/api/v1/admin/principals').set(root.auth).send({ userId: target, role: 'auditor' });
    expect(one.body.revoked).toEqual(['auditor']);
    const mismatch = await h
      .http()
      .delete('/api/v1/admin/principals')
      .query({ userId: target })
      .send({ userId: 'someone-else' })
      .set(root.auth);
    expect(mismatch.status).toBe(400);
    const notHeld = await h.http().delete('/api/v1/admin/principals').query({ userId: target, role: 'auditor' }).set(root.auth);
    expect(notHeld.status).toBe(404);
  });

  test('bad grants are 400 and change nothing', async () => {
    const target = `dave-${randomUUID()}`;
    for (const body of [
      { userId: target, role: 'superuser', reason: 'r' },
      { userId: target, role: 'admin' },
      { role: 'admin', reason: 'r' },
      { userId: target, role: 'admin', reason: '   ' },
      { userId: target, role: 'admin', reason: 'r', extra: true },
    ]) {
      const res = await h.http().post('/api/v1/admin/principals').set(root.auth).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    expect(await events({ resourceId: target })).toHaveLength(0);
    expect((await h.http().delete('/api/v1/admin/principals').set(root.auth)).status).toBe(400);
  });

  test('the last admin cannot be revoked', async () => {
    const admins = (await h.http().get('/api/v1/admin/principals').set(root.auth)).body.principals.filter(
      (p: { role: string; userId: string }) => p.role === 'admin' && p.userId !== rootId,
    );
    for (const admin of admins) {
      await h.http().delete('/api/v1/admin/principals').query({ userId: admin.userId, role: 'admin' }).set(root.auth).expect(200);
    }
    const last = await h.http().delete('/api/v1/admin/principals').query({ userId: rootId }).set(root.auth);
    expect(last.status).toBe(409);
    expect(last.body.code).toBe('conflict');
    const still = await h.http().get('/api/v1/admin/principals').set(root.auth);
    expect(still.body.principals).toContainEqual(expect.objectContaining({ userId: rootId, role: 'admin' }));
  });
});

describe('usage and budgets', () => {
  test('adjust, read the ledger, and never go below zero', async () => {
    const billing = await userWithRole('billing_admin');
    const target = `erin-${randomUUID()}`;
    const empty = await h.http().get('/api/v1/admin/usage').query({ userId: target }).set(billing.auth);
    expect(empty.body).toEqual({ budget: { userId: target, balanceCents: 0, updatedAt: null }, entries: [], nextCursor: null });

    const credit = await h
      .http()
      .post('/api/v1/admin/usage')
      .set(billing.auth)
      .send({ userId: target, amountCents: 2500, reason: 'Goodwill' });
    expect(credit.status).toBe(200);
    expect(credit.body.budget).toMatchObject({ userId: target, balanceCents: 2500 });
    expect(credit.body.entry).toMatchObject({
      amountCents: 2500,
      balanceAfterCents: 2500,
      kind: 'adjustment',
      actorUserId: billing.userId,
      reason: 'Goodwill',
    });
    const debit = await h.http().post('/api/v1/admin/usage').set(billing.auth).send({ userId: target, amountCents: -1000 });
    expect(debit.body.budget.balanceCents).toBe(1500);
    const overdraw = await h.http().post('/api/v1/admin/usage').set(billing.auth).send({ userId: target, amountCents: -1501 });
    expect(overdraw.status).toBe(409);

    const usage = await h.http().get('/api/v1/admin/usage').query({ userId: target, limit: 1 }).set(billing.auth);
    expect(usage.body.budget.balanceCents).toBe(1500);
    expect(usage.body.entries.map((e: { amountCents: number }) => e.amountCents)).toEqual([-1000]);
    const older = await h
      .http()
      .get('/api/v1/admin/usage')
      .query({ userId: target, limit: 1, cursor: usage.body.nextCursor })
      .set(billing.auth);
    expect(older.body.entries.map((e: { amountCents: number }) => e.amountCents)).toEqual([2500]);

    const audited = await events({ action: 'administration.budget.adjust', resourceId: target });
    expect(audited.map((e) => (e.metadata as { amountCents: number }).amountCents)).toEqual([2500, -1000]);
  });

  test('a repeated Idempotency-Key leaves one ledger row', async () => {
    const target = `frank-${randomUUID()}`;
    const key = randomUUID();
    const send = (amountCents: number) =>
      h.http().post('/api/v1/admin/usage').set(root.auth).set('Idempotency-Key', key).send({ userId: target, amountCents });
    const results = await Promise.all([send(700), send(700), send(700)]);
    for (const r of results) expect([200, 409]).toContain(r.status);
    const replay = await send(700);
    expect(replay.status).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect((await send(800)).status).toBe(422);
    const ledger = await h.runtime.database.db.selectFrom('ledger_entries').selectAll().where('user_id', '=', target).execute();
    expect(ledger).toHaveLength(1);
    expect((await h.http().get('/api/v1/admin/usage').query({ userId: target }).set(root.auth)).body.budget.balanceCents).toBe(700);
  });

  test('amounts are whole, non-zero cents within bounds', async () => {
    const target = `gina-${randomUUID()}`;
    for (const amountCents of [1.5, 0, '100', 100_000_001, null]) {
      const res = await h.http().post('/api/v1/admin/usage').set(root.auth).send({ userId: target, amountCents });
      expect(res.status).toBe(400);
    }
    expect((await h.http().post('/api/v1/admin/usage').set(root.auth).send({ amountCents: 5 })).status).toBe(400);
    expect((await h.http().get('/api/v1/admin/usage').set(root.auth)).status).toBe(400);
    const ledger = await h.runtime.database.db.selectFrom('ledger_entries').selectAll().where('user_id', '=', target).execute();
    expect(ledger).toHaveLength(0);
  });
});

describe('capability switches', () => {
  test('are stored, audited and reported', async () => {
    const res = await h.http().patch('/api/v1/admin/capabilities').set(root.auth).send({ automations: true });
    expect(res.status).toBe(200);
    expect(res.body.capabilities).toMatchObject({ automations: true, billingProvider: expect.any(String) });
    const audited = await events({ action: 'administration.capability.update', actor: rootId });
    expect(audited.at(-1)).toMatchObject({ outcome: 'success', metadata: { changes: { automations: true } } });
    expect((await h.http().patch('/api/v1/admin/capabilities').set(root.auth).send({})).status).toBe(400);
    expect((await h.http().patch('/api/v1/admin/capabilities').set(root.auth).send({ automations: 'off' })).status).toBe(400);
    expect((await h.http().patch('/api/v1/admin/capabilities').set(root.auth).send({ payments: true })).status).toBe(400);
  });
});

describe('the audit log', () => {
  const resourceType = `seeded-${randomUUID()}`;
  const actors = ['ann', 'ben', 'cat'].map((n) => `${n}-${randomUUID()}`);
  const actions = ['seed.create', 'seed.update', 'seed.delete', 'seed.read'];
  const seeded: Array<{ id: string; actor: string; action: string }> = [];

  beforeAll(async () => {
    const audit = new AuditService(h.runtime.database.db);
    for (let i = 0; i < 1000; i += 1) {
      const actor = actors[i % 3]!;
      const action = actions[i % 4]!;
      await audit.record(
        { userId: actor, requestId: `req-${i}` },
        { action, resourceType, resourceId: `r-${i}`, outcome: 'success', metadata: { i } },
      );
    }
    const rows = await h.runtime.database.db
      .selectFrom('audit_events')
      .select(['id', 'actor_user_id', 'action'])
      .where('resource_type', '=', resourceType)
      .orderBy('id', 'desc')
      .execute();
    seeded.push(...rows.map((r) => ({ id: r.id, actor: r.actor_user_id, action: r.action })));
  });

  async function readAll(query: Record<string, string | number>, limit: number): Promise<string[]> {
    const ids: string[] = [];
    let before: string | null = null;
    type Page = { status: number; body: { events: Array<{ eventId: string }>; nextBefore: string | null } };
    for (let pages = 0; pages < 2000; pages += 1) {
      const res: Page = await h
        .http()
        .get('/api/v1/admin/audit')
        .query({ ...query, limit, ...(before ? { before } : {}) })
        .set(root.auth);
      expect(res.status).toBe(200);
      expect(res.body.events.length).toBeLessThanOrEqual(limit);
      ids.push(...res.body.events.map((e) => e.eventId));
      before = res.body.nextBefore;
      if (!before) return ids;
    }
    throw new Error('paging did not end');
  }

  test('filters and before/limit paging return exactly the expected events, newest first', async () => {
    expect(seeded).toHaveLength(1000);
    expect(await readAll({ resourceType }, 200)).toEqual(seeded.map((e) => e.id));
    expect(await readAll({ resourceType, actorUserId: actors[1]! }, 37)).toEqual(
      seeded.filter((e) => e.actor === actors[1]).map((e) => e.id),
    );
    expect(await readAll({ resourceType, action: 'seed.update' }, 50)).toEqual(
      seeded.filter((e) => e.action === 'seed.update').map((e) => e.id),
    );
    const both = seeded.filter((e) => e.action === 'seed.read' && e.actor === actors[2]).map((e) => e.id);
    expect(await readAll({ resourceType, action: 'seed.read', actorUserId: actors[2]! }, 7)).toEqual(both);
    const first = await h.http().get('/api/v1/admin/audit').query({ resourceType, limit: 3 }).set(root.auth);
    expect(first.body.events[0]).toMatchObject({
      resourceType,
      outcome: 'success',
      requestId: expect.stringMatching(/^req-/),
      metadata: { i: 999 },
    });
    expect((await h.http().get('/api/v1/admin/audit').query({ limit: 201 }).set(root.auth)).status).toBe(400);
  });

  test('exports NDJSON and CSV of the filtered events, and records the export', async () => {
    const actor = actors[0]!;
    const expected = seeded.filter((e) => e.actor === actor).map((e) => e.id);
    const ndjson = await h
      .http()
      .get('/api/v1/admin/audit/export')
      .query({ resourceType, actorUserId: actor })
      .set(root.auth)
      .buffer(true)
      .parse(textBody);
    expect(ndjson.status).toBe(200);
    expect(ndjson.headers['content-type']).toMatch(/application\/x-ndjson/);
    expect(ndjson.headers['content-disposition']).toMatch(/attachment; filename="audit-.*\.ndjson"/);
    const lines = (ndjson.body as string)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { eventId: string });
    expect(lines.map((l) => l.eventId)).toEqual(expected);

    const csv = await h
      .http()
      .get('/api/v1/admin/audit/export')
      .query({ resourceType, actorUserId: actor, format: 'csv' })
      .set(root.auth)
      .buffer(true)
      .parse(textBody);
    const rows = (csv.body as string).trim().split('\r\n');
    expect(rows[0]).toBe('eventId,createdAt,action,actorUserId,resourceType,resourceId,outcome,requestId,metadata');
    expect(rows.slice(1).map((r) => r.split(',')[0])).toEqual(expected);

    const exports = await events({ action: 'administration.audit.export', actor: rootId });
    expect(exports.length).toBeGreaterThanOrEqual(2);
    expect(exports.at(-1)!.metadata).toMatchObject({ format: 'csv', filter: { resourceType, actorUserId: actor } });
  });

  test('events cannot be changed or deleted, even in the database', async () => {
    const db = h.runtime.database.db;
    await expect(
      db.updateTable('audit_events').set({ outcome: 'denied' }).where('resource_type', '=', resourceType).execute(),
    ).rejects.toThrow(/cannot be changed/);
    await expect(db.deleteFrom('audit_events').where('resource_type', '=', resourceType).execute()).rejects.toThrow(/cannot be changed/);
    // And no route changes them: the audit paths only read.
    const paths = loadApiDocument().paths;
    for (const path of Object.keys(paths).filter((p) => p.startsWith('/api/v1/admin/audit'))) {
      expect(Object.keys(paths[path] as object)).toEqual(['get']);
    }
  });
});

describe('CSV export', () => {
  test('quotes fields and defuses spreadsheet formulas', async () => {
    const line = auditEventCsvLine({
      eventId: 'e1',
      createdAt: 1,
      action: '=HYPERLINK("x")',
      actorUserId: 'a,b',
      resourceType: 't',
      resourceId: null,
      outcome: 'success',
      requestId: null,
      metadata: { note: 'say "hi"' },
    });
    expect(line).toBe('e1,1,"\'=HYPERLINK(""x"")","a,b",t,,success,,"{""note"":""say \\""hi\\""""}"\r\n');
  });
});
