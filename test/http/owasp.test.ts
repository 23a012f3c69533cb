import { useHarness } from '../helpers/harness';

// Parts of the OWASP API Security Top 10 (2023) not covered area by area.
const ctx = useHarness('alice', 'bob');

describe('API3 — property-level authorization: fields a user must not set are refused', () => {
  const privileged = { ownerUserId: 'bob', owner_user_id: 'bob', role: 'admin', balanceCents: 100_000, createdAt: 0, status: 'ready' };
  const creates: [string, Record<string, unknown>][] = [
    ['/api/v1/projects', { name: 'P' }],
    ['/api/v1/notes', { title: 'N' }],
    ['/api/v1/memory', { kind: 'fact', content: 'M' }],
    ['/api/v1/skills', { name: 'S' }],
    ['/api/v1/files', { name: 'f.txt', mimeType: 'text/plain', sizeBytes: 1 }],
    ['/api/v1/conversations', {}],
    ['/api/v1/automations', { name: 'A', prompt: 'p' }],
    ['/api/v1/webhooks', { url: 'https://8.8.8.8/hook', events: ['chat.completed'] }],
  ];

  test.each(creates)('POST %s with an owner, role, balance, status or timestamp is a 400 naming it', async (route, body) => {
    for (const [field, value] of Object.entries(privileged)) {
      const res = await ctx.h
        .http()
        .post(route)
        .set(ctx.alice.auth)
        .send({ ...body, [field]: value });
      expect({ field, status: res.status }).toEqual({ field, status: 400 });
      expect(res.body.details).toContainEqual({ path: `/body/${field}`, message: 'must NOT have additional properties' });
    }
  });

  test('a body naming another user is refused (403), not acted on for them', async () => {
    const res = await ctx.h.http().post('/api/v1/notes').set(ctx.alice.auth).send({ title: 'Mine?', userId: ctx.bob.userId });
    expect(res.status).toBe(403);
    expect((await ctx.h.http().get('/api/v1/notes').set(ctx.bob.auth)).body.notes).toEqual([]);
  });
});

describe('API8 — security misconfiguration', () => {
  test('no CORS grant to other origins, and never credentials with a wildcard', async () => {
    const preflight = await ctx.h
      .http()
      .options('/api/v1/projects')
      .set('Origin', 'https://evil.example.com')
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization');
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    const res = await ctx.h.http().get('/api/v1/projects').set(ctx.alice.auth).set('Origin', 'https://evil.example.com');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  });

  test('errors carry no stack, SQL or library internals, and no x-powered-by', async () => {
    const answers = [
      await ctx.h.http().post('/api/v1/projects').set(ctx.alice.auth).set('content-type', 'application/json').send('{"name":'),
      await ctx.h.http().get('/api/v1/projects').query({ projectId: "' or 1=1 --" }).set(ctx.alice.auth),
      await ctx.h.http().get('/api/v1/nowhere').set(ctx.alice.auth),
      await ctx.h.http().get('/api/v1/projects').set('Authorization', 'Bearer not.a.jwt'),
    ];
    for (const res of answers) {
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expect(res.headers['x-powered-by']).toBeUndefined();
      const text = JSON.stringify(res.body);
      expect(text).not.toMatch(/\bat .+\.(ts|js):\d+|node_modules|select |syntax error|SyntaxError/i);
    }
  });
});
