import type { Account } from '../accounts/account.entity.js';
import type { AccountsRepository } from '../accounts/accounts.repository.js';
import { accountBalanceEligible } from '../accounts/billing-eligibility.js';
import type { EventType } from '../events/event-types.js';
import type { LedgerRepository } from './ledger.repository.js';

/** The low-credits threshold when none is configured (LOW_CREDITS_MINOR), in cents. */
export const DEFAULT_LOW_CREDITS_MINOR = 500;

/**
 * What an account event carries: the account's balance and billing as `GET /api/v1/me` shows them,
 * without the calling key's parts (an account event is the account's, whichever key reads it).
 */
export interface AccountEventData {
  balance: { creditsMinor: number; currency: string; frozen: boolean };
  billing: { model: Account['billingModel']; budgetRequired: boolean };
}

export function accountEventData(account: Pick<Account, 'billingModel' | 'balanceMinor' | 'frozen'>): AccountEventData {
  return {
    balance: { creditsMinor: account.balanceMinor, currency: 'USD', frozen: account.frozen },
    billing: { model: account.billingModel, budgetRequired: !accountBalanceEligible(account) },
  };
}

/** The repositories of the transaction an account event joins. */
export interface AccountEventRepos {
  accounts: Pick<AccountsRepository, 'lockAccount'>;
  /** The event is written through the ledger, in whose transactions every account event is written. */
  ledger: Pick<LedgerRepository, 'appendEvent'>;
}

/**
 * Writes an account event (no key: owners see it, agents only those meant for them) in the caller's
 * transaction (`repos` are its repositories), which holds the account's lock and has just moved its
 * balance: the row is read again as that transaction left it. `extra` joins the account view (what
 * the event is about).
 */
export async function recordAccountEvent(
  repos: AccountEventRepos,
  type: EventType,
  accountId: string,
  at: Date,
  extra: Record<string, unknown> = {},
): Promise<void> {
  const account = await repos.accounts.lockAccount(accountId);
  if (!account) throw new Error(`account ${accountId} vanished inside its own transaction`);
  await repos.ledger.appendEvent({
    type,
    accountId,
    keyId: null,
    rentalId: null,
    data: { ...accountEventData(account), ...extra },
    at,
  });
}

/** Whether a balance moving from `before` to `after` falls from at or above `thresholdMinor` to under it. */
export function crossesLow(before: number, after: number, thresholdMinor: number): boolean {
  return before >= thresholdMinor && after < thresholdMinor;
}
