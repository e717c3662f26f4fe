import type { Account } from './account.entity.js';

/**
 * The one eligibility decision for ACCOUNT_BALANCE billing, shared by rental admission and
 * `billing.budgetRequired`. Reading it changes nothing.
 */
export function accountBalanceEligible(account: Pick<Account, 'billingModel' | 'frozen' | 'balanceMinor'>): boolean {
  return account.billingModel === 'ACCOUNT_BALANCE' && !account.frozen && account.balanceMinor >= 0;
}
