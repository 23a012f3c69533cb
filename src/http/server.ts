import http from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';

/**
 * A request that holds, from construction, every field that Express, the router, cookie-parser,
 * the validator and the service's own middleware set on it on the way to a handler.
 *
 * V8 gives an object room in itself for the properties its constructor sets; the ones added later
 * (a plain IncomingMessage is given about sixteen) each change its shape and go to a separate
 * property array that is copied into a larger one as it fills. Declared here, the fields are
 * written in place and every request keeps one shape: about a third more requests per second on
 * a small authenticated route, a tenth more on a list (README "Performance").
 * `query` is not among them: Express reads it through a getter, which the validator replaces with
 * the validated values; an own field would hide both.
 */
class ServiceRequest extends http.IncomingMessage {
  constructor(socket: Socket) {
    super(socket);
    const req = this as unknown as Record<string, unknown>;
    // Express and the router
    req.res = undefined;
    req.next = undefined;
    req.baseUrl = undefined;
    req.originalUrl = undefined;
    req.params = undefined;
    req.route = undefined;
    req.body = undefined;
    // parseurl's caches
    req._parsedUrl = undefined;
    req._parsedOriginalUrl = undefined;
    // cookie-parser
    req.secret = undefined;
    req.cookies = undefined;
    req.signedCookies = undefined;
    // express-openapi-validator
    req.openapi = undefined;
    // the service (src/http/types.ts)
    req.requestId = undefined;
    req.receivedAt = undefined;
    req.credentials = undefined;
    req.authFailure = undefined;
    req.caller = undefined;
  }
}

/** The service's HTTP server for `app`, not yet listening. */
export function createHttpServer(app: Express): http.Server {
  return http.createServer({ IncomingMessage: ServiceRequest }, app);
}
