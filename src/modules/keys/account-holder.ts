import type { Principal } from './principal.js';

/** The origin of the one key a headless signup creates; that key holds the account it made. */
export const SIGNUP_ORIGIN = 'signup';

/**
 * Whether a key acts as the account holder for account settings (the e-mail): an OWNER key, or
 * the signup key of a headless account (it has no owner besides its agent). Agent keys an owner
 * handed out act for the owner only within their limits, never on the owner's settings.
 */
export function mayManageAccount(principal: Pick<Principal, 'kind' | 'key'>): boolean {
  return principal.kind === 'OWNER' || principal.key.origin === SIGNUP_ORIGIN;
}
