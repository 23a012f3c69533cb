import type { NextFunction, Request, RequestHandler, Response } from 'express';

/**
 * The steps of one operation as one middleware, run in order as an Express route runs its
 * handlers: a step's error (passed to `next`, thrown, or a rejected promise) skips the rest and
 * goes to `next`, as do `next('route')` and `next('router')`; the last step's `next()` goes on
 * to `next` too. One layer instead of one per step: the route's own dispatch (its layer, method
 * check and error wrapping for each step) was repeated about ten times on every request.
 */
export function chain(steps: readonly RequestHandler[]): RequestHandler {
  if (steps.some((step) => step.length > 3)) throw new Error('an error handler cannot be a step of a chain');
  const count = steps.length;
  return (req: Request, res: Response, done: NextFunction) => {
    let i = 0;
    const next = (error?: unknown): void => {
      // An error, or `next('route')` / `next('router')`, which Express itself then acts on.
      if (error !== undefined && error !== null) {
        done(error);
        return;
      }
      if (i === count) {
        done();
        return;
      }
      const step = steps[i] as RequestHandler;
      i += 1;
      try {
        const result: unknown = step(req, res, next);
        if (result instanceof Promise) result.then(undefined, (reason: unknown) => next(reason ?? new Error('Rejected promise')));
      } catch (thrown) {
        next(thrown);
      }
    };
    next();
  };
}
