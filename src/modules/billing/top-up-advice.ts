import type { Scope } from '../keys/api-key.entity.js';

/**
 * The sentence a 402 ends with: who can add credits and how. A key with `billing` can ask for a
 * payment link itself; any other key (an agent's) cannot, so it is told to ask its owner and
 * what the owner uses, so the agent can pass that on instead of retrying.
 */
export function topUpAdvice(scopes: readonly Scope[]): string {
  if (scopes.includes('billing')) {
    return 'Top up with POST /api/v1/billing/topups (a payment link for a human to pay), then retry.';
  }
  return (
    'This key cannot add credits (it has no billing scope): ask the account owner to top up, ' +
    'with /topup in the Telegram bot or POST /api/v1/billing/topups with an owner key, then retry.'
  );
}
