import type { NextFunction, Request, Response } from 'express';
import type { components } from '../../generated/api';

type Role = components['schemas']['Role'];

/** What the role guard needs: refuse, and record, a caller who holds none of the roles (the entry wires the principals service). */
export interface RoleAuthority {
  authorize(
    actor: { userId: string; requestId: string | null },
    roles: readonly Role[],
    call: { action: string; resourceType: string; operationId: string; method: string; path: string },
  ): Promise<void>;
}

/**
 * Enforces the roles an operation declares in the document (`x-required-roles`), after
 * authentication and before the request is validated: a caller without one of them gets 403 and
 * one `denied` audit event (the action and resource type of the operation's `x-audit`).
 */
export function requireRoles(principals: RoleAuthority) {
  return async function requireRolesMiddleware(req: Request, _res: Response, next: NextFunction): Promise<void> {
    const operation = req.operation;
    const roles = operation?.['x-required-roles'];
    if (!roles || !req.caller) return next();
    const audit = operation['x-audit'];
    if (!audit) throw new Error(`${operation.operationId} declares x-required-roles without x-audit`);
    await principals.authorize({ userId: req.caller.userId, requestId: req.requestId }, roles, {
      action: audit.action,
      resourceType: audit.resourceType,
      operationId: operation.operationId,
      method: req.method,
      path: req.path,
    });
    next();
  };
}
