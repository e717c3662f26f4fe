import type { Request } from 'express';
import type { Services } from '../container.js';
import { AppError } from '../errors/app-error.js';
import type { Scope } from '../modules/keys/api-key.entity.js';
import type { Principal } from './principal.js';

/**
 * Routes whose handler reads the key's revocation again in its own transaction before acting:
 * admission, in the statement that locks the account (KeysService.lockAccountWithUsage). Their
 * callers may be authenticated with a key this process read in the last minute.
 */
const REVOCATION_CHECKED_IN_TRANSACTION = new Set(['POST /api/v1/rentals']);

/**
 * tsoa's authentication hook for `@Security('bearer', scopes)`: the key must be valid and
 * carry every listed scope. Returning the principal makes tsoa set `request.user`.
 */
export async function expressAuthentication(req: Request, securityName: string, scopes: string[] = []): Promise<Principal> {
  if (securityName !== 'bearer') throw new Error(`unknown security scheme ${securityName}`);
  const services = req.app.locals.services as Services;
  // Express has matched the route by now (this runs in its handler stack), so `req.route` names it.
  const route = `${req.method} ${(req.route as { path?: string } | undefined)?.path ?? ''}`;
  const principal = await services.keys.authenticate(req.header('authorization'), {
    revocationCheckedInTransaction: REVOCATION_CHECKED_IN_TRANSACTION.has(route),
  });
  const missing = scopes.filter((s) => !principal.scopes.includes(s as Scope));
  if (missing.length) {
    throw new AppError('FORBIDDEN', `This key lacks the scope${missing.length > 1 ? 's' : ''} ${missing.join(', ')} required here.`);
  }
  return principal;
}
