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
