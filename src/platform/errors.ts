/**
 * The one catalogue of error answers. Services throw these; the error middleware renders every
 * error, ours or a library's, as the ErrorResponse body `{ error, code, ...extras }`.
 */
import type { Schemas } from './api-types';

export interface ErrorDetail {
  path: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extras: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  body(): Record<string, unknown> {
    return { error: this.message, code: this.code, ...this.extras };
  }
}

/** The 401 message when no credentials were sent at all. */
export const AUTHENTICATION_REQUIRED =
  'Authentication is required: send an access token (Authorization: Bearer <token>) or the session cookie (service_session, from POST /auth/session).';

/** The capabilities an operator can switch (the fields of the capabilities update). */
export type CapabilityName = keyof Schemas['CapabilitiesUpdateRequest'];

const CAPABILITY_MESSAGES: Record<CapabilityName, string> = {
  automations: 'Automation scheduling is disabled for this deployment.',
  billing: 'Billing is disabled for this deployment.',
  vectorSearch: 'Vector search is disabled for this deployment.',
  byok: 'Model provider connections (bring your own key) are disabled for this deployment.',
  mcp: 'MCP servers are disabled for this deployment.',
  integrations: 'Integrations are disabled for this deployment.',
  openaiApi: 'The OpenAI-compatible API is disabled for this deployment.',
  mcpServer: 'The workspace MCP server is disabled for this deployment.',
};

/** The realm of the service's RFC 6750 challenges. */
export const AUTH_REALM = 'ai-workspace-service';

/**
 * The `WWW-Authenticate` challenge of every 401 (RFC 6750): with `error="invalid_token"` and the
 * reason when a bearer token was presented and refused. The RFC allows no quote, backslash or
 * character outside printable ASCII in a description (not even escaped): any is left out.
 */
function bearerChallenge(invalidTokenDescription?: string): string {
  const realm = `Bearer realm="${AUTH_REALM}"`;
  if (!invalidTokenDescription) return realm;
  return `${realm}, error="invalid_token", error_description="${invalidTokenDescription.replace(/[^\x20-\x21\x23-\x5b\x5d-\x7e]/g, '')}"`;
}

export const errors = {
  invalidRequest: (message = 'The request is not valid.', details: ErrorDetail[] = []) =>
    new ApiError(400, 'invalid_request', message, { details }),
  unauthenticated: (message = AUTHENTICATION_REQUIRED, invalidToken = false) =>
    new ApiError(401, 'unauthenticated', message, {}, { 'WWW-Authenticate': bearerChallenge(invalidToken ? message : undefined) }),
  forbidden: (message = 'You are not allowed to do this.') => new ApiError(403, 'forbidden', message),
  insufficientScope: (scope: string) =>
    new ApiError(
      403,
      'insufficient_scope',
      `This access token does not have the "${scope}" scope this operation needs.`,
      { scope },
      { 'WWW-Authenticate': `Bearer realm="${AUTH_REALM}", error="insufficient_scope", scope="${scope}"` },
    ),
  capabilityDisabled: (capability: CapabilityName) =>
    new ApiError(403, 'capability_disabled', CAPABILITY_MESSAGES[capability], { capability }),
  budgetExhausted: (periodEnd: Date) =>
    new ApiError(402, 'budget_exhausted', 'The budget for this period is spent.', { periodEnd: periodEnd.getTime() }),
  /**
   * A limit does not allow this: a plan's entitlement (`entitlement`, its `limit` and what is
   * `used`), or a spending quota without room for a call (`quotaId`, `groupId`, `model`,
   * `limitCents`, `periodEnd`).
   */
  quotaExceeded: (
    message: string,
    limit:
      | { entitlement: 'storageBytes' | 'automations'; limit: number; used: number }
      | { quotaId: string; groupId: string | null; model: string | null; limitCents: number; periodEnd: number },
  ) => new ApiError(402, 'quota_exceeded', message, limit),
  invalidSignature: (message: string) => new ApiError(400, 'invalid_signature', message),
  unsupportedProtocolVersion: (version: number, supported: readonly number[]) =>
    new ApiError(
      400,
      'unsupported_protocol_version',
      `Protocol version ${version} is not supported; this deployment speaks ${supported.join(', ')}.`,
      {
        supported,
      },
    ),
  commandIdMismatch: (details: ErrorDetail[]) =>
    new ApiError(400, 'command_id_mismatch', "The body's ids do not match the path.", { details }),
  invalidEnvironmentCredential: () =>
    new ApiError(403, 'invalid_environment_credential', "The Environment-Credential header is not this environment's credential."),
  pathOutsideGrant: (details: ErrorDetail[]) =>
    new ApiError(403, 'path_outside_grant', "The command names paths outside the environment's filesystem grant.", { details }),
  commandNotClaimed: (status: string) =>
    new ApiError(409, 'command_not_claimed', `The command is not claimed; it is ${status}.`, { status }),
  notFound: (message = 'Not found.') => new ApiError(404, 'not_found', message),
  /** A body field names a record that does not exist or is not the caller's: `details` names the field. */
  referenceNotFound: (field: string, message: string) =>
    new ApiError(404, 'not_found', message, { details: [{ path: `/body/${field}`, message: 'names no record of yours' }] }),
  principalNotFound: (message: string) => new ApiError(404, 'principal_not_found', message),
  /**
   * The OpenAI-compatible API's `model` names no model the caller may call (unknown, another
   * user's, blocked by the policy, or a connection's while `byok` is off), as OpenAI answers it.
   */
  modelNotFound: (modelId: string, why: string) =>
    new ApiError(404, 'model_not_found', `The model "${modelId}" does not exist or you do not have access to it.`, {
      details: [{ path: '/body/model', message: why }],
    }),
  methodNotAllowed: (allow: string) =>
    new ApiError(405, 'method_not_allowed', 'This method is not allowed on this route.', {}, allow ? { Allow: allow } : {}),
  rateLimited: (retryAfterSeconds: number, limit: number) =>
    new ApiError(
      429,
      'rate_limited',
      `Too many requests: at most ${limit} a minute per user. Retry after ${retryAfterSeconds} s.`,
      { retryAfter: retryAfterSeconds },
      {
        'Retry-After': String(retryAfterSeconds),
      },
    ),
  authFailuresLimited: (retryAfterSeconds: number, limit: number) =>
    new ApiError(
      429,
      'rate_limited',
      `Too many failed authentications from this address: at most ${limit} a minute. Retry after ${retryAfterSeconds} s.`,
      { retryAfter: retryAfterSeconds },
      { 'Retry-After': String(retryAfterSeconds) },
    ),
  requestTimeout: () => new ApiError(408, 'request_timeout', 'The request was not received in time.'),
  headersTooLarge: () => new ApiError(431, 'request_header_fields_too_large', 'The request headers are too large.'),
  conflict: (message: string) => new ApiError(409, 'conflict', message),
  idempotencyKeyReused: () =>
    new ApiError(422, 'idempotency_key_reused', 'This Idempotency-Key was already used with a different request.'),
  linkExpired: () => new ApiError(410, 'link_expired', 'This signed URL has expired; request a new one.'),
  approvalExpired: () => new ApiError(410, 'approval_expired', 'This approval expired before it was decided; nothing ran.'),
  linkUsed: () => new ApiError(410, 'link_used', 'This upload URL was already used; request a new one.'),
  payloadTooLarge: (message: string) => new ApiError(413, 'payload_too_large', message),
  unsupportedMediaType: (message: string) => new ApiError(415, 'unsupported_media_type', message),
  rangeNotSatisfiable: (size: number) =>
    new ApiError(416, 'range_not_satisfiable', 'The requested range is not satisfiable.', {}, { 'Content-Range': `bytes */${size}` }),
  /**
   * `message` says what failed without any address (see describeProviderError); `ref` names what
   * failed: a chat reply's `messageId`, or a media call's `generationId` (none for the
   * OpenAI-compatible API, which stores nothing).
   */
  modelProviderError: (message: string, ref: { messageId: string } | { generationId: string } | Record<string, never> = {}) =>
    new ApiError(502, 'model_provider_error', message, ref),
  /** An integration's authorization server could not be used (discovery, registration); `message` names no address or token. */
  integrationError: (message: string) => new ApiError(502, 'integration_error', message),
  modelProviderTimeout: (message: string, ref: { messageId: string } | { generationId: string } | Record<string, never> = {}) =>
    new ApiError(504, 'model_provider_timeout', message, ref),
  databaseUnavailable: () =>
    new ApiError(503, 'database_unavailable', 'The database is unavailable; try again shortly.', {}, { 'Retry-After': '2' }),
  /** Refused at once because the instance is at its load limit (src/http/load-shed.ts). */
  overloaded: () => new ApiError(503, 'overloaded', 'The service is at capacity; try again shortly.', {}, { 'Retry-After': '1' }),
  storageUnavailable: () =>
    new ApiError(503, 'storage_unavailable', 'The file store is unavailable; try again shortly.', {}, { 'Retry-After': '5' }),
  internal: (requestId: string) => new ApiError(500, 'internal_error', 'An unexpected error occurred.', { requestId }),
};

/** A body sent as another media type than the operation takes (every such operation takes JSON). */
export const bodyNotJson = (): ApiError =>
  errors.invalidRequest('The request body must be JSON (Content-Type: application/json).', [
    { path: '/headers/content-type', message: 'must be application/json' },
  ]);
