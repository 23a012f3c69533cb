import type { RequestHandler } from 'express';
import { type CapabilityName, errors } from './errors';

export interface CapabilitySource {
  isEnabled(name: CapabilityName): Promise<boolean>;
}

/**
 * Gates every route of a capability: when it is switched off the route answers the deterministic
 * `403 capability_disabled` body, the same on every gated route, and its handler never runs.
 */
export function requireCapability(capabilities: CapabilitySource, name: CapabilityName): RequestHandler {
  return async function capabilityGate(_req, _res, next) {
    if (await capabilities.isEnabled(name)) next();
    else next(errors.capabilityDisabled(name));
  };
}

/**
 * The gate of the operations that declare their capability in the document (`x-capability`),
 * placed after authentication and before request validation: with the capability off, every such
 * operation answers the same body, whatever the request.
 */
export function requireDeclaredCapability(capabilities: CapabilitySource): RequestHandler {
  return async function declaredCapabilityGate(req, _res, next) {
    const declared = (req as unknown as { openapi?: { schema?: { 'x-capability'?: CapabilityName } } }).openapi?.schema?.['x-capability'];
    if (declared === undefined || (await capabilities.isEnabled(declared))) next();
    else next(errors.capabilityDisabled(declared));
  };
}
