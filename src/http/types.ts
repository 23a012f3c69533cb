import type { middleware } from 'express-openapi-validator';
import type { SignedGrant } from '../platform/signed-urls';
import type { AccessTokenIdentity, Caller } from './auth';
import type { ApiOperation } from './operation';

/** What express-openapi-validator sets as `req.openapi`, taken from the type of its public middleware. */
export type OpenApiMetadata = NonNullable<Parameters<ReturnType<typeof middleware>[number]>[0]['openapi']>;

declare module 'express-serve-static-core' {
  interface Request {
    /** Set by the request-id middleware for every request. */
    requestId: string;
    /** When the request-id middleware saw the request (`performance.now()`), for its latency. */
    receivedAt: number;
    /** The document's operation of the Express route, set first on every documented route (src/http/openapi.ts). */
    operation?: ApiOperation;
    /** Set by express-openapi-validator once it has matched the request. */
    openapi?: OpenApiMetadata;
    /** The authenticated caller, set once the operation's security passed. */
    caller?: Caller;
    /** What each security scheme found, before one is chosen as the caller. */
    credentials?: {
      bearer?: { userId: string } | AccessTokenIdentity;
      session?: { userId: string; token: string };
      signed?: SignedGrant;
      signedExpired?: boolean;
    };
    /** Why authentication failed, for the 401 message. */
    authFailure?: string;
    /** Whether `authFailure` is about a bearer token that was presented (RFC 6750 `invalid_token`). */
    invalidToken?: boolean;
  }
}
