import type { Request } from 'express';
import type { ApiKey, KeyKind, Scope } from './api-key.entity.js';

/** The authenticated caller: one API key of one account. */
export interface Principal {
  keyId: string;
  accountId: string;
  kind: KeyKind;
  scopes: Scope[];
  key: ApiKey;
}

/**
 * The principal of a request to a `@Security('bearer')` route: the one the keys authenticated
 * (tsoa puts it on `request.user` before the handler runs).
 */
export function principalOf(req: Request): Principal {
  return req.user as Principal;
}

/**
 * THE operator rule: an OWNER key made with admin (`owner create --admin`) may open the operator
 * pages (the jobs dashboard) and the providers' checks. The jobs dashboard asks it through
 * `KeysService.isOperator`, since src/jobs may not import a module.
 */
export function isOperator(principal: { kind: string; key: { isAdmin: boolean } }): boolean {
  return principal.kind === 'OWNER' && principal.key.isAdmin;
}
