import type { Express, Request } from 'express';
import { AppError } from '../errors/app-error.js';
import { expressRoutesStating, ROUTE_FACTS } from './route-facts.js';

/** An authenticated caller, as far as HTTP needs one: the scopes its key carries. */
export interface Caller {
  scopes: readonly string[];
}

/**
 * What authentication needs of the keys: the caller a bearer `Authorization` header names, or
 * the uniform 401 UNAUTHENTICATED. `revocationCheckedInTransaction` says the route reads the
 * key's revocation again in its own transaction, so a key read moments ago may stand in.
 */
export interface KeyAuthenticator {
  authenticate(header: string | undefined, options: { revocationCheckedInTransaction: boolean }): Promise<Caller>;
  /** The caller AGENT key `keyId` is, read afresh; 401 UNAUTHENTICATED once it is revoked. */
  authenticateAgent(keyId: string): Promise<Caller>;
}

/**
 * The mark of a request made inside this process on behalf of an agent key (the remote MCP
 * endpoint calling the API for the key its OAuth token acts as). A symbol on the request
 * object: nothing that arrives over the network can carry one.
 */
const IN_PROCESS_CALLER = Symbol('in-process caller');

/** Marks `req`, made in this process and never read from a socket, as made by AGENT key `keyId`. */
export function markInProcessCaller(req: object, keyId: string): void {
  (req as { [IN_PROCESS_CALLER]?: string })[IN_PROCESS_CALLER] = keyId;
}

function inProcessCallerOf(req: object): string | undefined {
  return (req as { [IN_PROCESS_CALLER]?: string })[IN_PROCESS_CALLER];
}

/** Gives an app the authenticator its `@Security('bearer')` routes use (one per app, so tests may run several). */
export function useAuthenticator(app: Express, keys: KeyAuthenticator): void {
  app.locals.authenticator = keys;
}

/** The routes whose handler re-reads the key's revocation in its own transaction (admission's account lock). */
const REVOCATION_CHECKED_IN_TRANSACTION = expressRoutesStating(ROUTE_FACTS.revocationCheckedInTransaction);

/** Whether the route Express matched (`POST /api/v1/rentals`) re-reads the key's revocation itself. */
export function checksRevocationInTransaction(route: string): boolean {
  return REVOCATION_CHECKED_IN_TRANSACTION.has(route);
}

/**
 * tsoa's authentication hook for `@Security('bearer', scopes)`: the key must be valid and
 * carry every listed scope. Returning the caller makes tsoa set `request.user`.
 */
export async function expressAuthentication(
  req: Request,
  securityName: string,
  scopes: string[] = [],
): Promise<Caller> {
  if (securityName !== 'bearer') throw new Error(`unknown security scheme ${securityName}`);
  const keys = req.app.locals.authenticator as KeyAuthenticator;
  // Express has matched the route by now (this runs in its handler stack), so `req.route` names it.
  const route = `${req.method} ${(req.route as { path?: string } | undefined)?.path ?? ''}`;
  const inProcess = inProcessCallerOf(req);
  const caller = inProcess
    ? await keys.authenticateAgent(inProcess)
    : await keys.authenticate(req.header('authorization'), {
        revocationCheckedInTransaction: checksRevocationInTransaction(route),
      });
  const missing = scopes.filter((s) => !caller.scopes.includes(s));
  if (missing.length) {
    throw new AppError(
      'FORBIDDEN',
      `This key lacks the scope${missing.length > 1 ? 's' : ''} ${missing.join(', ')} required here.`,
    );
  }
  return caller;
}
