import express from 'express';
import supertest from 'supertest';
import { AuditService } from '../../src/areas/audit/service';
import { CapabilityService } from '../../src/areas/capabilities/service';
import { errorMiddleware } from '../../src/http/error-middleware';
import { requireDeclaredCapability } from '../../src/http/capability-gate';
import type { CapabilityName } from '../../src/platform/errors';
import { createLogger } from '../../src/platform/logger';
import { type Harness, startHarness } from '../helpers/harness';

describe('the capability gate', () => {
  function gatedApp(enabled: boolean, declared: string | null = 'automations') {
    const app = express();
    let handled = 0;
    // What the service's routes attach: the document's operation (src/http/openapi.ts).
    app.use((req, _res, next) => {
      req.operation = {
        operationId: 'createAutomation',
        security: [],
        statuses: new Set(['200', '403']),
        ...(declared === null ? {} : { 'x-capability': declared as CapabilityName }),
      };
      next();
    });
    app.post('/api/v1/automations', requireDeclaredCapability({ isEnabled: async () => enabled }), (_req, res) => {
      handled += 1;
      res.json({ ok: true });
    });
    app.use(errorMiddleware(createLogger('silent'), { bodyLimitBytes: 1024, requireDeclaredStatus: false }));
    return { app, handled: () => handled };
  }

  test('answers the deterministic disabled response and never runs the handler', async () => {
    const off = gatedApp(false);
    for (let i = 0; i < 2; i += 1) {
      const res = await supertest(off.app).post('/api/v1/automations');
      expect(res.status).toBe(403);
      expect(res.body).toEqual({
        error: 'Automation scheduling is disabled for this deployment.',
        code: 'capability_disabled',
        capability: 'automations',
      });
    }
    expect(off.handled()).toBe(0);
  });

  test('lets the request through when the capability is on', async () => {
    const on = gatedApp(true);
    expect((await supertest(on.app).post('/api/v1/automations')).body).toEqual({ ok: true });
    expect(on.handled()).toBe(1);
  });

  test('lets operations through that declare no capability', async () => {
    const undeclared = gatedApp(false, null);
    expect((await supertest(undeclared.app).post('/api/v1/automations')).body).toEqual({ ok: true });
  });
});

describe('capability flags', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ CAPABILITY_VECTOR_SEARCH: 'false' });
  });
  afterAll(() => h.close());

  test('GET /api/v1/capabilities reports the configured defaults', async () => {
    const user = await h.newUser();
    const { data, response } = await user.api.GET('/api/v1/capabilities');
    expect(response.status).toBe(200);
    expect(data).toEqual({
      capabilities: {
        automations: true,
        billing: false,
        vectorSearch: false,
        byok: true,
        mcp: true,
        integrations: true,
        openaiApi: true,
        mcpServer: true,
        billingProvider: 'none',
      },
    });
    expect((await h.http().get('/api/v1/capabilities')).status).toBe(401);
    const unknownParameter = await h.http().get('/api/v1/capabilities').query({ all: 'yes' }).set(user.auth);
    expect(unknownParameter.status).toBe(400);
    expect(unknownParameter.body.code).toBe('invalid_request');
  });

  test('a stored switch reaches every instance once its cache expires', async () => {
    const db = h.runtime.database.db;
    let now = 1_000_000;
    const defaults = {
      automations: true,
      billing: false,
      vectorSearch: true,
      byok: true,
      mcp: true,
      integrations: true,
      openaiApi: true,
      mcpServer: true,
      billingProvider: 'stripe' as const,
      cacheMs: 2000,
    };
    const audit = new AuditService(db);
    const admin = { userId: 'admin-1', requestId: null };
    const instanceA = new CapabilityService({ db, audit, defaults, now: () => now });
    const instanceB = new CapabilityService({ db, audit, defaults, now: () => now });
    expect(await instanceB.isEnabled('automations')).toBe(true);
    await instanceA.update(admin, { automations: false });
    expect(await instanceA.isEnabled('automations')).toBe(false);
    expect(await instanceB.isEnabled('automations')).toBe(true); // still cached
    now += 2001;
    expect(await instanceB.isEnabled('automations')).toBe(false);
    expect((await instanceB.current()).billingProvider).toBe('none');
    await instanceA.update(admin, { billing: true });
    now += 2001;
    expect(await instanceB.current()).toMatchObject({ billing: true, billingProvider: 'stripe' });
    await instanceA.update(admin, { automations: true, billing: false });
  });
});
