import { readMinor } from '../../db/columns.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import type { AccountsRepository } from '../accounts/accounts.repository.js';
import { normalizeEmail } from '../accounts/email.js';
import { mayManageAccount } from '../keys/account-holder.js';
import type { LedgerRepository } from './ledger.repository.js';
import type { KeysService } from '../keys/keys.service.js';
import type { BalanceResponse, EmailResponse } from './billing.dto.js';

export class BillingService {
  constructor(
    private readonly store: Store<{ accounts: AccountsRepository; ledger: LedgerRepository }>,
    private readonly keys: KeysService,
  ) {}

  /**
   * Credits and the ledger, newest first; `before` pages to older entries. An agent key sees only
   * the entries it caused (its rentals, its top-ups); an owner key sees the whole account's.
   */
  async balance(principal: Principal, limit = 50, before?: number): Promise<BalanceResponse> {
    const [[account, entries], usage] = await Promise.all([
      this.store.read((r) =>
        Promise.all([r.accounts.get(principal.accountId), r.ledger.visible(principal, limit + 1, before)]),
      ),
      this.keys.usage([principal.key]),
    ]);
    const page = entries.slice(0, limit);
    return {
      creditsMinor: account.balanceMinor,
      currency: 'USD',
      frozen: account.frozen,
      keyRemainingBudgetMinor: usage.get(principal.keyId)!.remainingBudgetMinor,
      entries: page.map((e) => ({
        id: readMinor(e.id),
        kind: e.kind,
        amountMinor: e.amountMinor,
        balanceAfterMinor: e.balanceAfterMinor,
        description: e.description,
        reference: e.externalRef,
        rentalId: e.rentalId,
        keyId: e.keyId,
        createdAt: e.createdAt.toISOString(),
      })),
      nextBefore: entries.length > limit ? readMinor(page[page.length - 1].id) : null,
    };
  }

  /**
   * Attaches the e-mail that card checkout needs (receipts go there). Owner keys may set it, and
   * the key of a headless signup, which is the account holder of the account it created. An agent
   * key given out by an owner may not, whatever its scopes: the address is the owner's.
   */
  async setEmail(principal: Principal, email: string): Promise<EmailResponse> {
    if (!mayManageAccount(principal)) {
      throw new AppError(
        'FORBIDDEN',
        "Only an owner key (or the key a signup created) may set the account e-mail; agent keys cannot change their owner's address.",
      );
    }
    const clean = normalizeEmail(email);
    if (clean === null) throw new AppError('VALIDATION_FAILED', 'Invalid request: email: must be an e-mail address.');
    await this.store.read((r) => r.accounts.setEmail(principal.accountId, clean));
    return { email: clean };
  }
}
