import type { components, operations } from '../../generated/api';
import type { CapabilityName } from '../platform/errors';

/**
 * An operation of the document as the service reads it before the validator runs (`req.operation`,
 * set by the route, src/http/openapi.ts): the OpenAPI fields it uses and its own extensions.
 */
export interface ApiOperation {
  operationId: keyof operations;
  /** The operation's security requirements, or the document's when it declares none. */
  security: Array<Record<string, unknown>>;
  'x-capability'?: CapabilityName;
  'x-required-roles'?: Array<components['schemas']['Role']>;
  'x-audit'?: { action: string; resourceType: string };
  /** The access-token scope the operation needs (every operation names one). */
  'x-scope'?: components['schemas']['AccessTokenScope'];
  /** The statuses the operation declares (`'200'`, `'401'`, … and `'default'` if present). */
  statuses: ReadonlySet<string>;
  /** The fields of a JSON body whose `oneOf` asks for exactly one of them (named in its 400). */
  exactlyOneOf?: string[];
}
