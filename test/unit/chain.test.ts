import express, { type RequestHandler } from 'express';
import supertest from 'supertest';
import { chain } from '../../src/http/chain';

/** A chain on one route, with an error handler that answers the error's message. */
function app(steps: RequestHandler[]) {
  const server = express();
  server.get('/x', chain(steps), (_req, res) => {
    res.status(404).json({ reached: 'after the chain' });
  });
  server.use(((error: Error, _req, res, _next) => {
    res.status(500).json({ error: error.message });
  }) as express.ErrorRequestHandler);
  return supertest(server);
}

const mark =
  (name: string): RequestHandler =>
  (req, _res, next) => {
    (req as unknown as { seen: string[] }).seen = [...((req as unknown as { seen?: string[] }).seen ?? []), name];
    next();
  };
const answer: RequestHandler = (req, res) => {
  res.json({ seen: (req as unknown as { seen: string[] }).seen });
};

describe('chain', () => {
  it('runs its steps in order and stops at the one that answers', async () => {
    const res = await app([mark('a'), mark('b'), answer, mark('never')]).get('/x');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ seen: ['a', 'b'] });
  });

  it('goes on after its last step calls next', async () => {
    const res = await app([mark('a'), mark('b')]).get('/x');
    expect(res.body).toEqual({ reached: 'after the chain' });
  });

  it.each([
    ['passed to next', ((_req, _res, next) => next(new Error('passed'))) as RequestHandler, 'passed'],
    [
      'thrown',
      (() => {
        throw new Error('thrown');
      }) as RequestHandler,
      'thrown',
    ],
    ['rejected by an async step', (async () => Promise.reject(new Error('rejected'))) as RequestHandler, 'rejected'],
    ['rejected without a reason', (async () => Promise.reject(undefined)) as RequestHandler, 'Rejected promise'],
  ])('skips the rest on an error %s', async (_name, failing, message) => {
    const res = await app([mark('a'), failing, answer]).get('/x');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: message });
  });

  it("leaves the route on next('route'), as a route's own step would", async () => {
    const res = await app([(_req, _res, next) => next('route'), answer]).get('/x');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({});
  });

  it('refuses an error handler as a step', () => {
    expect(() => chain([((_e: unknown, _req: unknown, _res: unknown, next: () => void) => next()) as unknown as RequestHandler])).toThrow(/error handler/);
  });
});
