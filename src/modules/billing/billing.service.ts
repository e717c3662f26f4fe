import type { DataSource } from 'typeorm';
import type { Principal } from '../../http/principal.js';
import { Account } from '../accounts/account.entity.js';
import type { KeysService } from '../keys/keys.service.js';
import type { BalanceResponse } from './billing.dto.js';
import type { LedgerService } from './ledger.service.js';

export class BillingService {
  constructor(
    private readonly ds: DataSource,
    private readonly ledger: LedgerService,
    private readonly keys: KeysService,
  ) {}

  async balance(principal: Principal, limit = 50): Promise<BalanceResponse> {
    const [account, entries, usage] = await Promise.all([
      this.ds.getRepository(Account).findOneByOrFail({ id: principal.accountId }),
      this.ledger.recent(principal.accountId, limit),
      this.keys.usage([principal.key]),
    ]);
    return {
      creditsMinor: account.balanceMinor,
      currency: 'USD',
      frozen: account.frozen,
      keyRemainingBudgetMinor: usage.get(principal.keyId)!.remainingBudgetMinor,
      entries: entries.map((e) => ({
        id: Number(e.id),
        kind: e.kind,
        amountMinor: e.amountMinor,
        balanceAfterMinor: e.balanceAfterMinor,
        description: e.description,
        rentalId: e.rentalId,
        keyId: e.keyId,
        createdAt: e.createdAt.toISOString(),
      })),
    };
  }
}
