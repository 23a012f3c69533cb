import type { RequestHandler } from 'express';
import { type CapabilityName, errors } from '../platform/errors';

export interface CapabilitySource {
  isEnabled(name: CapabilityName): Promise<boolean>;
}

/**
 * The gate of the operations that declare their capability in the document (`x-capability`),
 * placed after authentication and before request validation: with the capability off, every such
 * operation answers the same `403 capability_disabled` body, whatever the request, and its handler
 * never runs. Operations that declare none pass.
 */
export function requireDeclaredCapability(capabilities: CapabilitySource): RequestHandler {
  return async function declaredCapabilityGate(req, _res, next) {
    const declared = req.operation?.['x-capability'];
    if (declared === undefined || (await capabilities.isEnabled(declared))) next();
    else next(errors.capabilityDisabled(declared));
  };
}
