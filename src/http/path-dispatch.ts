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
  /** The answer for each template without parameters, by its path in lower case: most requests' paths, found in one look-up. */
  private readonly known = new Map<string, number[]>();

  constructor(templates: readonly string[]) {
    templates.forEach((template, position) => {
      let at = this.root;
      for (const segment of template.split('/').slice(1)) {
        if (segment.includes('{')) {
          at.parameter ??= step();
          at = at.parameter;
        } else {
          const key = segment.toLowerCase();
          let next = at.literal.get(key);
          if (!next) {
            next = step();
            at.literal.set(key, next);
          }
          at = next;
        }
      }
      at.ends.push(position);
    });
    for (const template of templates) {
      if (!template.includes('{')) this.known.set(template.toLowerCase(), this.walk(template.toLowerCase()));
    }
  }

  /** The positions of the templates `path` may match, in the order the templates were given. */
  candidates(path: string): number[] {
    const trimmed = (path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path).toLowerCase();
    return this.known.get(trimmed) ?? this.walk(trimmed);
  }

  /** Walks the index with `path` (lower case, no trailing slash), a segment at a time. */
  private walk(path: string): number[] {
    let steps = [this.root];
    for (let from = 1; from <= path.length; ) {
      let to = path.indexOf('/', from);
      if (to < 0) to = path.length;
      const segment = path.slice(from, to);
      const next: Step[] = [];
      for (const at of steps) {
        const literal = at.literal.get(segment);
        if (literal) next.push(literal);
        if (at.parameter) next.push(at.parameter);
      }
      if (next.length === 0) return [];
      steps = next;
      from = to + 1;
    }
    const found = steps.flatMap((at) => at.ends);
    return found.length > 1 ? found.sort((a, b) => a - b) : found;
  }
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
    // A router that did not handle the request calls back with undefined, or with null after `next('router')`.
    const tryNext = (error?: unknown): void => {
      const route = error === undefined || error === null ? routes[candidates[i] as number] : undefined;
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
