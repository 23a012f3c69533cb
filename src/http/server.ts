import http from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';

/** Node's request and response constructors, called on an object whose prototype is chosen here. */
type NodeConstructor<A extends unknown[]> = (this: object, ...args: A) => void;

/** Node's constructor as a plain function, or an error at start-up if this Node made it a class. */
function callable<A extends unknown[]>(constructor: unknown, name: string): NodeConstructor<A> {
  if (typeof constructor !== 'function' || Function.prototype.toString.call(constructor).startsWith('class')) {
    throw new Error(`node:http's ${name} is not a plain function on this Node (${process.version}): src/http/server.ts must construct it another way`);
  }
  return constructor as NodeConstructor<A>;
}

/**
 * Requests and responses are constructed with Express's prototypes for `app` (`app.request`,
 * `app.response`) and with every field that Express, the router, cookie-parser, the validator
 * and the service's own middleware set on them on the way to a handler.
 *
 * Prototypes: Express gives every request and response the app's prototypes with
 * `Object.setPrototypeOf` as it starts handling them. On Node 20's V8 an object whose prototype is
 * changed that way keeps what it references alive through young-generation collections, to be
 * copied by each and promoted to the old generation: a bare node:http server that sets the
 * prototypes per request promotes 1.3 MB per collection instead of 0.3 KB and answers half as
 * many requests (38,000 → 20,000 req/s here). Constructed with the same prototypes, the call
 * changes nothing (V8 returns at once when the prototype is already the one given) and the
 * objects die young (README "Performance").
 *
 * Fields: V8 gives an object room in itself for the properties its constructor sets; the ones
 * added later (a plain IncomingMessage is given about sixteen) each change its shape and go to a
 * separate property array that is copied into a larger one as it fills. Declared here, the fields
 * are written in place and every request keeps one shape.
 * `query` is not among them: Express reads it through a getter, which the validator replaces with
 * the validated values; an own field would hide both.
 */
function constructors(app: Express): Pick<http.ServerOptions, 'IncomingMessage' | 'ServerResponse'> {
  const incomingMessage = callable<[Socket]>(http.IncomingMessage, 'IncomingMessage');
  const serverResponse = callable<[http.IncomingMessage, unknown]>(http.ServerResponse, 'ServerResponse');

  function ServiceRequest(this: Record<string, unknown>, socket: Socket): void {
    incomingMessage.call(this, socket);
    // Express and the router
    this.res = undefined;
    this.next = undefined;
    this.baseUrl = undefined;
    this.originalUrl = undefined;
    this.params = undefined;
    this.route = undefined;
    this.body = undefined;
    // parseurl's caches
    this._parsedUrl = undefined;
    this._parsedOriginalUrl = undefined;
    // cookie-parser
    this.secret = undefined;
    this.cookies = undefined;
    this.signedCookies = undefined;
    // express-openapi-validator
    this.openapi = undefined;
    // the service (src/http/types.ts)
    this.requestId = undefined;
    this.receivedAt = undefined;
    this.credentials = undefined;
    this.authFailure = undefined;
    this.caller = undefined;
  }
  ServiceRequest.prototype = app.request;

  function ServiceResponse(this: Record<string, unknown>, req: http.IncomingMessage, options: unknown): void {
    serverResponse.call(this, req, options);
    // Express
    this.locals = undefined;
  }
  ServiceResponse.prototype = app.response;

  return {
    IncomingMessage: ServiceRequest as unknown as typeof http.IncomingMessage,
    ServerResponse: ServiceResponse as unknown as typeof http.ServerResponse,
  };
}

/** The service's HTTP server for `app`, not yet listening. */
export function createHttpServer(app: Express): http.Server {
  return http.createServer(constructors(app), app);
}
