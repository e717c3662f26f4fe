import { AppError } from '../../errors/app-error.js';
import type { Account } from './account.entity.js';

/**
 * The frozen-account check, the one place that reads the flag: support froze the account, so it
 * starts nothing new (rentals, agent keys) and is not billed from its balance. Reading the
 * account's state stays allowed, and so does topping it up.
 */
export function isFrozen(account: Pick<Account, 'frozen'>): boolean {
  return account.frozen;
}

/** 402 ACCOUNT_FROZEN for a frozen account, saying what it `cannot` do ("start rentals"). */
export function assertNotFrozen(account: Pick<Account, 'frozen'>, cannot: string): void {
  if (isFrozen(account))
    throw new AppError('ACCOUNT_FROZEN', `This account is frozen; it cannot ${cannot}. Contact support.`);
}

/**
 * The one eligibility decision for ACCOUNT_BALANCE billing, shared by rental admission and
 * `billing.budgetRequired`: not for a frozen account nor one whose credits are negative. Reading
 * it changes nothing.
 */
export function accountBalanceEligible(account: Pick<Account, 'billingModel' | 'frozen' | 'balanceMinor'>): boolean {
  return account.billingModel === 'ACCOUNT_BALANCE' && !isFrozen(account) && account.balanceMinor >= 0;
}
