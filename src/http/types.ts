import type { SignedGrant } from '../platform/signed-urls';
import type { Caller } from './auth';

declare module 'express-serve-static-core' {
  interface Request {
    /** Set by the request-id middleware for every request. */
    requestId: string;
    /** When the request-id middleware saw the request (`performance.now()`), for its latency. */
    receivedAt: number;
    /** The authenticated caller, set once the operation's security passed. */
    caller?: Caller;
    /** What each security scheme found, before one is chosen as the caller. */
    credentials?: { bearer?: string; session?: { userId: string; token: string }; signed?: SignedGrant; signedExpired?: boolean };
    /** Why authentication failed, for the 401 message. */
    authFailure?: string;
    /** Whether `authFailure` is about a bearer token that was presented (RFC 6750 `invalid_token`). */
    invalidToken?: boolean;
  }
}
