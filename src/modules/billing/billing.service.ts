import type { DataSource } from 'typeorm';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../../http/principal.js';
import { Account } from '../accounts/account.entity.js';
import type { KeysService } from '../keys/keys.service.js';
import type { BalanceResponse, EmailResponse } from './billing.dto.js';
import type { LedgerService } from './ledger.service.js';

export class BillingService {
  constructor(
    private readonly ds: DataSource,
    private readonly ledger: LedgerService,
    private readonly keys: KeysService,
  ) {}

  /** Credits and the ledger, newest first; `before` pages to older entries. */
  async balance(principal: Principal, limit = 50, before?: number): Promise<BalanceResponse> {
    const [account, entries, usage] = await Promise.all([
      this.ds.getRepository(Account).findOneByOrFail({ id: principal.accountId }),
      this.ledger.recent(principal.accountId, limit + 1, before),
      this.keys.usage([principal.key]),
    ]);
    const page = entries.slice(0, limit);
    return {
      creditsMinor: account.balanceMinor,
      currency: 'USD',
      frozen: account.frozen,
      keyRemainingBudgetMinor: usage.get(principal.keyId)!.remainingBudgetMinor,
      entries: page.map((e) => ({
        id: Number(e.id),
        kind: e.kind,
        amountMinor: e.amountMinor,
        balanceAfterMinor: e.balanceAfterMinor,
        description: e.description,
        reference: e.externalRef,
        rentalId: e.rentalId,
        keyId: e.keyId,
        createdAt: e.createdAt.toISOString(),
      })),
      nextBefore: entries.length > limit ? Number(page[page.length - 1].id) : null,
    };
  }

  /**
   * Attaches the e-mail that card checkout needs. Owner keys may set it, and so may keys with the
   * billing scope (the one agent keys use to ask a human for money).
   */
  async setEmail(principal: Principal, email: string): Promise<EmailResponse> {
    if (principal.kind !== 'OWNER' && !principal.scopes.includes('billing')) {
      throw new AppError('FORBIDDEN', 'Only an owner key or a key with the billing scope may set the account e-mail.');
    }
    const clean = email.trim();
    if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(clean) || clean.length > 254) {
      throw new AppError('VALIDATION_FAILED', 'Invalid request: email: must be an e-mail address.');
    }
    await this.ds.getRepository(Account).update({ id: principal.accountId }, { email: clean });
    return { email: clean };
  }
}
