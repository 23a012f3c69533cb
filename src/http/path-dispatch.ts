import type { RequestHandler } from 'express';

/** A step of the index: the literal segments that follow, and a `{parameter}` segment's. */
interface Step {
  literal: Map<string, Step>;
  parameter: Step | undefined;
  /** Positions (in the order given) of the templates that end here. */
  ends: number[];
}

const step = (): Step => ({ literal: new Map(), parameter: undefined, ends: [] });

/**
 * Which of a list of path templates (`/api/v1/notes/{noteId}`) a request's path may match, found
 * one segment at a time rather than by testing each template's pattern in turn, as Express's router
 * does: the cost is the same for the first template and the last. It errs on the side of more:
 * literal segments are compared as Express compares them by default (case-insensitively, one
 * trailing slash allowed) and a segment holding a parameter takes any segment, so the templates'
 * own routes still make the final match.
 */
export class PathIndex {
  private readonly root = step();

  constructor(templates: readonly string[]) {
    templates.forEach((template, position) => {
      let at = this.root;
      for (const segment of segmentsOf(template)) {
        if (segment.includes('{')) {
          at.parameter ??= step();
          at = at.parameter;
        } else {
          let next = at.literal.get(segment.toLowerCase());
          if (!next) {
            next = step();
            at.literal.set(segment.toLowerCase(), next);
          }
          at = next;
        }
      }
      at.ends.push(position);
    });
  }

  /** The positions of the templates `path` may match, in the order the templates were given. */
  candidates(path: string): number[] {
    let steps = [this.root];
    for (const segment of segmentsOf(path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path)) {
      const next: Step[] = [];
      const key = segment.toLowerCase();
      for (const at of steps) {
        const literal = at.literal.get(key);
        if (literal) next.push(literal);
        if (at.parameter) next.push(at.parameter);
      }
      if (next.length === 0) return [];
      steps = next;
    }
    const found = steps.flatMap((at) => at.ends);
    return found.length > 1 ? found.sort((a, b) => a - b) : found;
  }
}

/** A path's segments after its leading slash. */
function segmentsOf(path: string): string[] {
  return path.split('/').slice(1);
}

/**
 * One middleware over a handler per path template (each an Express router with that path's
 * route): a request goes to the handlers of the templates its path may match (`PathIndex`), in
 * their order, until one handles it; a path no template matches goes on to `next` at once.
 */
export function dispatchByPath<H extends RequestHandler>(routes: ReadonlyArray<{ template: string; handler: H }>): PathDispatch<H> {
  const index = new PathIndex(routes.map((route) => route.template));
  const dispatch = (req: Parameters<RequestHandler>[0], res: Parameters<RequestHandler>[1], next: Parameters<RequestHandler>[2]) => {
    const candidates = index.candidates(req.path);
    let i = 0;
    const tryNext = (error?: unknown): void => {
      const route = error === undefined ? routes[candidates[i] as number] : undefined;
      i += 1;
      if (route) void route.handler(req, res, tryNext);
      else next(error);
    };
    tryNext();
  };
  return Object.assign(dispatch, { handlers: routes.map((route) => route.handler) });
}

/** The dispatching middleware, with the handlers it dispatches to (in their templates' order). */
export type PathDispatch<H extends RequestHandler> = RequestHandler & { readonly handlers: readonly H[] };
